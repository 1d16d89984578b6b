// BPE models over token ids.
//  * BpeModel: merges ranked by position in the merges list (Hugging Face BPE / GGUF "gpt2").
//    Byte-level mode takes raw-byte pieces and starts from the 256 byte-alphabet tokens.
//  * SpmModel: SentencePiece-style BPE that merges the adjacent pair whose concatenation
//    has the highest score (GGUF "llama"), with <0xXX> byte fallback.
// Both keep a pointer to the Vocab they were built from (owned by the same Pipeline).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/pipeline.h"
#include "util/status.h"

namespace tachyon::tokenizer {

// Open-addressing map from a pair of ids to (rank, merged id).
class PairMap {
 public:
  void Reserve(size_t n);
  // Returns false if the pair was already present (the first rank wins).
  bool Insert(int32_t a, int32_t b, int32_t rank, int32_t merged);
  // Returns false if absent.
  bool Find(int32_t a, int32_t b, int32_t* rank, int32_t* merged) const {
    if (slots_.empty()) return false;
    const uint64_t key = Key(a, b);
    size_t i = Hash(key) & mask_;
    while (true) {
      const Slot& s = slots_[i];
      if (s.key == kEmpty) return false;
      if (s.key == key) {
        *rank = s.rank;
        *merged = s.merged;
        return true;
      }
      i = (i + 1) & mask_;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0, merged = 0;
  };
  static uint64_t Key(int32_t a, int32_t b) {
    return (uint64_t{static_cast<uint32_t>(a)} << 32) | static_cast<uint32_t>(b);
  }
  static size_t Hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
};

struct BpeOptions {
  bool byte_level = false;     // pieces are raw bytes; initial symbols are byte-alphabet tokens
  bool byte_fallback = false;  // unknown chars become <0xXX> tokens
  bool ignore_merges = false;  // a piece that is itself a token is emitted whole
  bool fuse_unk = false;
  int32_t unk = -1;
  std::string continuing_subword_prefix;  // non-empty: unsupported (rejected by loaders)
};

class BpeModel : public Model {
 public:
  // merges: pairs of token spellings in priority order. Errors name `source` and the merge
  // that refers to a token missing from the vocabulary.
  static Result<std::unique_ptr<BpeModel>> Create(
      const Vocab* vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      const BpeOptions& options, const std::string& source);
  void Encode(std::string_view piece, std::vector<int32_t>* out) const override;

 private:
  void Merge(std::vector<int32_t>* symbols, std::vector<int32_t>* out) const;
  void EncodeUncached(std::string_view piece, std::vector<int32_t>* out) const;
  const Vocab* vocab_ = nullptr;
  uint64_t serial_ = 0;  // identifies this model in the per-thread piece cache
  BpeOptions opt_;
  PairMap merges_;
  std::array<int32_t, 256> byte_ids_{};      // byte-level: byte -> token; fallback: <0xXX>
  std::vector<std::string> raw_spellings_;   // unused unless byte-level ignore_merges
  StringIdMap raw_index_;  // byte-level: raw bytes -> id
};

class SpmModel : public Model {
 public:
  static Result<std::unique_ptr<SpmModel>> Create(const Vocab* vocab, int32_t unk,
                                                  const std::string& source);
  void Encode(std::string_view piece, std::vector<int32_t>* out) const override;

 private:
  const Vocab* vocab_ = nullptr;
  int32_t unk_ = -1;
  std::array<int32_t, 256> byte_ids_{};
};

class WordPieceModel : public Model {
 public:
  // word_prefix: spelling prefix of word-initial pieces ("" for Hugging Face, "▁" for GGUF);
  // continuing_prefix: prefix of the other pieces ("##" for Hugging Face, "" for GGUF).
  WordPieceModel(const Vocab* vocab, int32_t unk, std::string word_prefix,
                 std::string continuing_prefix, size_t max_chars)
      : vocab_(vocab), unk_(unk), word_prefix_(std::move(word_prefix)),
        cont_prefix_(std::move(continuing_prefix)), max_chars_(max_chars) {}
  void Encode(std::string_view piece, std::vector<int32_t>* out) const override;

 private:
  const Vocab* vocab_;
  int32_t unk_;
  std::string word_prefix_, cont_prefix_;
  size_t max_chars_;
};

}  // namespace tachyon::tokenizer
