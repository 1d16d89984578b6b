// Vocabulary: the tokens as a grammar matcher sees them (each id's exact output bytes) and the
// token trie every mask computation walks.
//
// Thread-safety: immutable after construction (but for the shared state below, made once behind
// a mutex); share it freely (std::shared_ptr<const>).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace tachyon::tokenizer {
class Tokenizer;
}

namespace tachyon::grammar {

// The vocabulary's byte strings as a trie in depth-first (preorder) order. Node 0 is the root
// (the empty string); node i > 0 adds byte() to its parent's string. Sibling order is by byte,
// so the preorder is the sorted order of the byte strings.
class TokenTrie {
 public:
  struct Node {
    uint32_t end;        // index one past this node's subtree
    uint32_t tok_begin;  // tokens()[tok_begin, own_end) end exactly here
    uint32_t own_end;
    uint32_t sub_end;  // tokens()[tok_begin, sub_end) are this node's subtree's tokens
    uint16_t depth;    // string length (root 0)
    uint8_t byte;
  };
  // Token ids with their bytes, ids without bytes left out. REQUIRES: bytes.size() < 2^31.
  explicit TokenTrie(const std::vector<std::string>& bytes);
  const std::vector<Node>& nodes() const { return nodes_; }
  // Token ids in trie (sorted-bytes) order.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Index of token `id` in tokens() (its sorted-bytes rank); -1 for tokens without bytes.
  int32_t rank(int32_t id) const { return rank_[id]; }
  // The longest token's length in bytes (0 for an empty trie).
  size_t max_depth() const { return max_depth_; }
  // The length in bytes of tokens()[rank].
  uint32_t length(size_t rank) const { return lengths_[rank]; }
  // The longest token in node i's subtree, its own tokens included (0: none).
  uint32_t max_length_below(size_t i) const { return max_below_[i]; }

  // The bytes on the edges below node i (its strict subtree) as a 256-bit set, for nodes with
  // at least kMinBelow tokens strictly below them; null for the others.
  static constexpr uint32_t kMinBelow = 4;
  const uint64_t* below_bytes(size_t i) const {
    return below_index_[i] < 0 ? nullptr : &below_bytes_[4 * static_cast<size_t>(below_index_[i])];
  }

 private:
  size_t max_depth_ = 0;
  std::vector<uint16_t> lengths_;  // by rank
  std::vector<uint16_t> max_below_;
  std::vector<int32_t> below_index_;
  std::vector<uint64_t> below_bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> rank_;
};

class Vocabulary {
 public:
  // Each token's bytes as Tokenizer::TokenBytes gives them (byte-level BPE and SentencePiece
  // byte pieces decoded, "▁" as a space); control, unknown and unused tokens get none.
  // eos_ids: the end-of-generation ids (allowed only where a grammar may end); each must be
  // in range (else InvalidArgument); they get no bytes.
  static Result<std::shared_ptr<const Vocabulary>> FromTokenizer(const tokenizer::Tokenizer& t,
                                                                 std::vector<int32_t> eos_ids);
  // bytes[id] = token id's output bytes; "" = a token no grammar ever allows.
  static Result<std::shared_ptr<const Vocabulary>> FromTokenBytes(std::vector<std::string> bytes,
                                                                  std::vector<int32_t> eos_ids);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  // ceil(size() / 32): the length of a token bitmask.
  size_t mask_words() const { return (bytes_.size() + 31) / 32; }
  // Token id's bytes; "" for tokens without bytes and ids out of range.
  std::string_view bytes(int32_t id) const {
    return id >= 0 && id < size() ? std::string_view(bytes_[id]) : std::string_view();
  }
  // Sorted, no duplicates.
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  bool IsEos(int32_t id) const { return id >= 0 && id < size() && is_eos_[id]; }
  const TokenTrie& trie() const { return trie_; }
  // The tokens of 1 to n bytes as a bitmask of mask_words() words. REQUIRES: 1 <= n <=
  // kLengthMasks.
  static constexpr int kLengthMasks = 32;
  const uint32_t* tokens_up_to(int n) const { return &length_masks_[(n - 1) * mask_words()]; }

  // State shared by every grammar compiled against this vocabulary (compiled.cc keeps the
  // token classes there that depend only on a grammar fragment): made by `make` on the first
  // call, the same object on every later one (`make` is then not called). Thread-safe.
  std::shared_ptr<void> Shared(std::shared_ptr<void> (*make)()) const;

 private:
  Vocabulary(std::vector<std::string> bytes, std::vector<int32_t> eos_ids);
  std::vector<std::string> bytes_;
  std::vector<int32_t> eos_ids_;
  std::vector<char> is_eos_;
  TokenTrie trie_;
  std::vector<uint32_t> length_masks_;
  mutable std::mutex shared_mu_;
  mutable std::shared_ptr<void> shared_;  // GUARDED_BY(shared_mu_)
};

}  // namespace tachyon::grammar
