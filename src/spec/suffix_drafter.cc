#include "spec/suffix_drafter.h"

#include <algorithm>
#include <cmath>

namespace tachyon::spec {

double SuffixDraft(const SuffixTree& tree, std::span<const int32_t> tokens,
                   const SuffixConfig& params, int max_tokens, std::vector<int32_t>* draft,
                   int* match_len, std::vector<double>* probs) {
  double best_score = 0;
  int best_m = 0;
  std::vector<int32_t> best, cand;
  std::vector<double> best_p, cand_p;
  const int longest = std::min<int>(tree.max_depth() - 1, static_cast<int>(tokens.size()));
  for (int m = 1; m <= longest; ++m) {
    const int32_t node = tree.Find(tokens.last(static_cast<size_t>(m)));
    // A pattern that never occurred has no occurring extension: longer ones miss too.
    if (node == SuffixTree::kNone) break;
    const int limit =
        std::min(max_tokens, static_cast<int>(std::floor(params.max_spec_factor * m + 1e-9)));
    if (limit <= 0) continue;
    cand.clear();
    cand_p.clear();
    const double score = tree.Continue(node, limit, params.min_token_prob, &cand, &cand_p);
    if (!cand.empty() && score >= best_score) {
      best_score = score;
      best_m = m;
      best.swap(cand);
      best_p.swap(cand_p);
    }
  }
  draft->insert(draft->end(), best.begin(), best.end());
  if (probs) probs->insert(probs->end(), best_p.begin(), best_p.end());
  if (match_len) *match_len = best_m;
  return best_score;
}

void SuffixDrafter::Propose(int64_t seq_id, std::span<const int32_t> tokens,
                            int64_t num_prompt_tokens, int max_tokens,
                            std::vector<int32_t>* draft) {
  std::vector<double> accept(draft->size());
  ProposeScored(seq_id, tokens, num_prompt_tokens, max_tokens, draft, &accept);
}

void SuffixDrafter::ProposeScored(int64_t seq_id, std::span<const int32_t> tokens,
                                  int64_t num_prompt_tokens, int max_tokens,
                                  std::vector<int32_t>* draft, std::vector<double>* accept) {
  (void)num_prompt_tokens;
  auto it = seqs_.try_emplace(seq_id, params_.max_tree_depth).first;
  Seq& s = it->second;
  if (tokens.size() < s.num_inserted) {  // not the sequence the tree was built from
    s = Seq(params_.max_tree_depth);
  }
  for (; s.num_inserted < tokens.size(); ++s.num_inserted) s.tree.Append(tokens[s.num_inserted]);
  if (max_tokens <= 0) return;
  std::vector<int32_t> own, global;
  std::vector<double> own_p, global_p;
  int own_m = 0, global_m = 0;
  const double own_score =
      SuffixDraft(s.tree, tokens, params_, max_tokens, &own, &own_m, &own_p);
  double global_score = 0;
  if (global_.num_nodes() > 0) {
    global_score =
        SuffixDraft(global_, tokens, params_, max_tokens, &global, &global_m, &global_p);
  }
  const bool take_global = !global.empty() && (global_score > own_score ||
                                               (global_score == own_score && global_m > own_m));
  const std::vector<int32_t>& pick = take_global ? global : own;
  const std::vector<double>& pick_p = take_global ? global_p : own_p;
  draft->insert(draft->end(), pick.begin(), pick.end());
  accept->insert(accept->end(), pick_p.begin(), pick_p.end());
}

void SuffixDrafter::Release(int64_t seq_id, std::span<const int32_t> tokens,
                            int64_t num_prompt_tokens) {
  seqs_.erase(seq_id);
  if (params_.max_cached_requests <= 0) return;
  size_t first = static_cast<size_t>(
      std::clamp<int64_t>(num_prompt_tokens, 0, static_cast<int64_t>(tokens.size())));
  // At most D nodes per token: a longer output keeps its tail, so one output fits the bound.
  const size_t most = static_cast<size_t>(kMaxGlobalNodes / params_.max_tree_depth);
  first = std::max(first, tokens.size() - std::min(tokens.size(), most));
  if (first == tokens.size()) return;
  cached_.emplace_back(tokens.begin() + static_cast<std::ptrdiff_t>(first), tokens.end());
  global_.Insert(cached_.back());
  // Oldest out first (the newest always fits).
  while (cached_.size() > 1 && (cached_.size() > static_cast<size_t>(params_.max_cached_requests) ||
                                global_.num_nodes() > kMaxGlobalNodes)) {
    global_.Remove(cached_.front());
    cached_.pop_front();
  }
}

}  // namespace tachyon::spec
