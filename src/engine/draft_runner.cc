#include "engine/draft_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "sampling/logits_processors.h"
#include "sampling/sampler.h"
#include "spec/draft_sampling.h"
#include "util/logging.h"

namespace tachyon::engine {

DraftModelRunner::DraftModelRunner(const DraftModelConfig& config, ModelExecutor* executor)
    : config_(config), executor_(executor), kv_(config.kv) {
  if (config_.n_vocab <= 0) config_.n_vocab = executor_->n_vocab();
  CHECK(executor_->n_vocab() <= config_.n_vocab)
      << "DraftModelRunner: the draft's logits are wider than the target's vocabulary";
}

DraftModelRunner::SeqState* DraftModelRunner::Sync(const Request& r) {
  auto it = seqs_.find(r.seq_id);
  if (it == seqs_.end()) return &seqs_[r.seq_id];
  SeqState& st = it->second;
  if (!kv_.HasRequest(r.seq_id)) {
    st = SeqState{};
    return &st;
  }
  // Fed drafts the sequence now continues with have valid KV; the rest is rolled back. The
  // last token stays uncomputed: drafting needs its logits.
  const int64_t size = static_cast<int64_t>(r.tokens.size());
  size_t m = 0;
  while (m < st.fed.size() && st.computed + static_cast<int64_t>(m) < size - 1 &&
         r.tokens[st.computed + m] == st.fed[m]) {
    ++m;
  }
  st.computed += static_cast<int64_t>(m);
  st.fed.clear();
  kv_.CommitComputed(r.seq_id, r.tokens, st.computed, r.cache_salt);
  kv_.FreeBlocksPast(r.seq_id, st.computed);
  return &st;
}

void DraftModelRunner::Reconcile(const Request& r) {
  if (seqs_.count(r.seq_id)) Sync(r);
}

void DraftModelRunner::Free(int64_t seq_id) {
  seqs_.erase(seq_id);
  kv_.Free(seq_id);
}

std::span<const float> DraftModelRunner::DraftProbs(int64_t seq_id, int j) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end() || j < 0 || j >= it->second.num_probs) return {};
  const size_t n = static_cast<size_t>(config_.n_vocab);
  return std::span<const float>(it->second.probs).subspan(static_cast<size_t>(j) * n, n);
}

bool DraftModelRunner::Draft(Work* w, std::span<float> row) {
  const Request& r = *w->request;
  const std::span<const int32_t> ctx(w->context);
  sampling::SamplingInput in;
  in.prompt = ctx.first(r.num_prompt_tokens);
  in.output = ctx.subspan(r.num_prompt_tokens);
  in.seed = r.seed;
  if (!r.params.ignore_eos) in.eos_ids = config_.eos_token_ids;
  int32_t token;
  if (w->params.temperature == 0.0f) {
    if (config_.p_min > 0) {
      const float top = *std::max_element(row.begin(), row.end());
      if (std::exp(top - sampling::LogSumExp(row)) < config_.p_min) return false;
    }
    token = sampling::Sample(row, w->params, in).token;
  } else {
    SeqState& st = *w->state;
    const size_t n = static_cast<size_t>(config_.n_vocab);
    std::vector<float> q;
    spec::DraftDistribution(row, w->params, in, n, &q);
    const uint64_t step = static_cast<uint64_t>(r.params.output_offset) + in.output.size();
    token = spec::DrawFrom(q, spec::DraftUniform(r.seed, step));
    if (q[static_cast<size_t>(token)] < config_.p_min) return false;
    st.probs.resize((static_cast<size_t>(st.num_probs) + 1) * n);
    std::copy(q.begin(), q.end(), st.probs.begin() + static_cast<ptrdiff_t>(st.num_probs * n));
    ++st.num_probs;
  }
  w->context.push_back(token);
  return true;
}

Status DraftModelRunner::Forward(std::span<float>* logits) {
  const size_t rows = batch_.seqs.size();
  logits_.resize(rows * static_cast<size_t>(executor_->n_vocab()));
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(executor_->Execute(batch_, logits_));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cost_.Observe(static_cast<int64_t>(batch_.tokens.size()), s);
  ++num_forwards_;
  forward_seconds_ += s;
  *logits = std::span<float>(logits_);
  return OkStatus();
}

Status DraftModelRunner::Propose(std::span<const Job> jobs) {
  std::vector<Work> work;
  work.reserve(jobs.size());
  int64_t budget = config_.max_num_batched_tokens;
  for (const Job& job : jobs) {
    Request* r = job.request;
    r->draft_tokens.clear();
    SeqState* st = Sync(*r);
    st->num_probs = 0;
    if (budget <= 0 || job.num_tokens < 0) continue;
    kv::PrefixHit hit;
    if (!kv_.HasRequest(r->seq_id)) {
      st->computed = 0;
      hit = kv_.FindCachedPrefix(r->tokens, r->cache_salt);
    }
    const int64_t start = std::max(st->computed, hit.num_tokens);
    const int64_t size = static_cast<int64_t>(r->tokens.size());
    const int64_t end = job.num_tokens > 0 ? size : size - 1;  // catch-up only: not the last
    const int64_t chunk = std::min(end - start, budget);
    if (chunk <= 0) continue;
    int k = chunk == size - start ? job.num_tokens : 0;
    // Drafts d1..d(k-1) are fed back (dk is not): their positions need blocks too.
    if (k > 0 && !kv_.Allocate(r->seq_id, start + chunk + k - 1, hit)) k = 0;
    if (k == 0 && !kv_.Allocate(r->seq_id, start + chunk, hit)) continue;
    st->computed = start;
    budget -= chunk;
    Work w;
    w.request = r;
    w.state = st;
    w.chunk = chunk;
    w.k = k;
    w.params = r->params;
    w.params.logprobs = -1;
    work.push_back(std::move(w));
  }
  if (work.empty()) return OkStatus();

  // Position 0: every sequence's catch-up, ending at its last token.
  batch_.tokens.clear();
  batch_.seqs.clear();
  for (const Work& w : work) {
    const Request& r = *w.request;
    model::SequenceSlice s;
    s.token_start = static_cast<int64_t>(batch_.tokens.size());
    s.n_tokens = w.chunk;
    s.pos_start = w.state->computed;
    s.block_table = kv_.BlockTable(r.seq_id);
    s.num_logits = 1;
    s.decode_start = r.num_prompt_tokens;  // the same drafts whatever the step (model/batch.h)
    batch_.tokens.insert(batch_.tokens.end(), r.tokens.begin() + s.pos_start,
                         r.tokens.begin() + s.pos_start + w.chunk);
    batch_.seqs.push_back(std::move(s));
  }
  std::span<float> logits;
  Status st = Forward(&logits);
  if (!st.ok()) {
    for (const Work& w : work) kv_.FreeBlocksPast(w.request->seq_id, w.state->computed);
    return st;
  }
  const size_t n_vocab = static_cast<size_t>(executor_->n_vocab());
  std::vector<size_t> drafting;  // indices into work of the sequences still drafting
  for (size_t i = 0; i < work.size(); ++i) {
    Work& w = work[i];
    w.state->computed += w.chunk;
    kv_.CommitComputed(w.request->seq_id, w.request->tokens, w.state->computed,
                       w.request->cache_salt);
    if (w.k == 0) continue;
    w.context = w.request->tokens;
    if (!Draft(&w, logits.subspan(i * n_vocab, n_vocab))) {
      w.k = 0;
      continue;
    }
    drafting.push_back(i);
  }

  // Positions 1..: each drafting sequence feeds its previous draft, one token each.
  for (int j = 1; !drafting.empty(); ++j) {
    std::erase_if(drafting, [&](size_t i) { return work[i].k <= j; });
    if (drafting.empty()) break;
    batch_.tokens.clear();
    batch_.seqs.clear();
    for (size_t i : drafting) {
      const Work& w = work[i];
      model::SequenceSlice s;
      s.token_start = static_cast<int64_t>(batch_.tokens.size());
      s.n_tokens = 1;
      s.pos_start = static_cast<int64_t>(w.context.size()) - 1;
      s.block_table = kv_.BlockTable(w.request->seq_id);
      s.num_logits = 1;
      s.decode_start = w.request->num_prompt_tokens;
      batch_.tokens.push_back(w.context.back());
      batch_.seqs.push_back(std::move(s));
    }
    st = Forward(&logits);
    if (!st.ok()) break;
    for (size_t row = 0; row < drafting.size(); ++row) {
      Work& w = work[drafting[row]];
      w.state->fed.push_back(w.context.back());
      if (!Draft(&w, logits.subspan(row * n_vocab, n_vocab))) w.k = j;  // j drafts so far
    }
  }
  for (Work& w : work) {
    Request* r = w.request;
    if (!st.ok() || w.k == 0) {
      w.state->num_probs = 0;
      continue;
    }
    r->draft_tokens.assign(w.context.begin() + static_cast<ptrdiff_t>(r->tokens.size()),
                           w.context.end());
  }
  return st;
}

}  // namespace tachyon::engine
