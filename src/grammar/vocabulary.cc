#include "grammar/vocabulary.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace tachyon::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& bytes) {
  std::vector<int32_t> order;
  for (size_t i = 0; i < bytes.size(); ++i) {
    // Byte strings longer than a depth fits (no real token) are never allowed.
    if (!bytes[i].empty() && bytes[i].size() <= 65535) order.push_back(static_cast<int32_t>(i));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes[a] != bytes[b] ? bytes[a] < bytes[b] : a < b;
  });
  tokens_.reserve(order.size());
  nodes_.push_back(Node{0, 0, 0, 0, 0, 0});
  std::vector<uint32_t> path = {0};  // path[d] = node at depth d on the current branch
  auto close = [&](uint32_t node) {
    nodes_[node].end = static_cast<uint32_t>(nodes_.size());
    nodes_[node].sub_end = static_cast<uint32_t>(tokens_.size());
  };
  std::string_view prev;
  for (int32_t id : order) {
    const std::string_view s = bytes[id];
    const size_t max_len = s.size();
    max_depth_ = std::max(max_depth_, max_len);
    size_t lcp = 0;
    while (lcp < prev.size() && lcp < max_len && prev[lcp] == s[lcp]) ++lcp;
    while (path.size() > lcp + 1) {
      close(path.back());
      path.pop_back();
    }
    for (size_t d = lcp; d < max_len; ++d) {
      const auto n = static_cast<uint32_t>(nodes_.size());
      const auto t = static_cast<uint32_t>(tokens_.size());
      nodes_.push_back(Node{0, t, t, t, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(s[d])});
      path.push_back(n);
    }
    Node& last = nodes_[path.back()];
    tokens_.push_back(id);
    lengths_.push_back(static_cast<uint16_t>(max_len));
    last.own_end = static_cast<uint32_t>(tokens_.size());
    prev = s;
  }
  while (!path.empty()) {
    close(path.back());
    path.pop_back();
  }
  // Subtree byte sets, children before parents (reverse preorder).
  std::vector<uint32_t> parent(nodes_.size(), 0), at_depth(max_depth_ + 1, 0);
  for (size_t i = 1; i < nodes_.size(); ++i) {
    parent[i] = at_depth[nodes_[i].depth - 1];
    at_depth[nodes_[i].depth] = static_cast<uint32_t>(i);
  }
  std::vector<uint64_t> below(4 * nodes_.size(), 0);
  max_below_.assign(nodes_.size(), 0);
  for (size_t i = nodes_.size(); i-- > 0;) {
    if (nodes_[i].own_end > nodes_[i].tok_begin) {
      max_below_[i] = std::max<uint16_t>(max_below_[i], nodes_[i].depth);
    }
    if (i == 0) break;
    const size_t p = parent[i];
    max_below_[p] = std::max(max_below_[p], max_below_[i]);
    const uint8_t b = nodes_[i].byte;
    below[4 * p + (b >> 6)] |= uint64_t{1} << (b & 63);
    for (int w = 0; w < 4; ++w) below[4 * p + w] |= below[4 * i + w];
  }
  below_index_.assign(nodes_.size(), -1);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].sub_end - nodes_[i].own_end < kMinBelow) continue;
    below_index_[i] = static_cast<int32_t>(below_bytes_.size() / 4);
    below_bytes_.insert(below_bytes_.end(), below.begin() + 4 * i, below.begin() + 4 * i + 4);
  }
  rank_.assign(bytes.size(), -1);
  for (size_t i = 0; i < tokens_.size(); ++i) rank_[tokens_[i]] = static_cast<int32_t>(i);
}

Vocabulary::Vocabulary(std::vector<std::string> bytes, std::vector<int32_t> eos_ids)
    : bytes_(std::move(bytes)),
      eos_ids_(std::move(eos_ids)),
      is_eos_(bytes_.size(), 0),
      trie_(bytes_) {
  for (int32_t id : eos_ids_) is_eos_[id] = 1;
  const size_t words = mask_words();
  length_masks_.assign(kLengthMasks * words, 0);
  for (size_t id = 0; id < bytes_.size(); ++id) {
    const size_t len = trie_.rank(static_cast<int32_t>(id)) < 0 ? 0 : bytes_[id].size();
    if (len == 0 || len > static_cast<size_t>(kLengthMasks)) continue;
    for (size_t n = len; n <= static_cast<size_t>(kLengthMasks); ++n) {
      length_masks_[(n - 1) * words + id / 32] |= 1u << (id % 32);
    }
  }
}

std::shared_ptr<void> Vocabulary::Shared(std::shared_ptr<void> (*make)()) const {
  std::lock_guard<std::mutex> lock(shared_mu_);
  if (shared_ == nullptr) shared_ = make();
  return shared_;
}

Result<std::shared_ptr<const Vocabulary>> Vocabulary::FromTokenBytes(std::vector<std::string> bytes,
                                                                     std::vector<int32_t> eos_ids) {
  if (bytes.size() >= (size_t{1} << 31)) return InvalidArgument("vocabulary too large");
  std::sort(eos_ids.begin(), eos_ids.end());
  eos_ids.erase(std::unique(eos_ids.begin(), eos_ids.end()), eos_ids.end());
  for (int32_t id : eos_ids) {
    if (id < 0 || static_cast<size_t>(id) >= bytes.size()) {
      return InvalidArgument("end-of-generation id " + std::to_string(id) +
                             " is outside the vocabulary of " + std::to_string(bytes.size()));
    }
    bytes[id].clear();
  }
  return std::shared_ptr<const Vocabulary>(new Vocabulary(std::move(bytes), std::move(eos_ids)));
}

Result<std::shared_ptr<const Vocabulary>> Vocabulary::FromTokenizer(const tokenizer::Tokenizer& t,
                                                                    std::vector<int32_t> eos_ids) {
  using tokenizer::TokenType;
  std::vector<std::string> bytes(static_cast<size_t>(std::max(0, t.vocab_size())));
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    const TokenType type = t.token_type(id);
    if (t.IsSpecial(id) || type == TokenType::kControl || type == TokenType::kUnknown ||
        type == TokenType::kUnused) {
      continue;
    }
    bytes[id] = t.TokenBytes(id);
  }
  return FromTokenBytes(std::move(bytes), std::move(eos_ids));
}

}  // namespace tachyon::grammar
