// SentencePiece-style BPE by scores (GGUF "llama" vocabularies) and WordPiece.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {

Result<std::unique_ptr<SpmModel>> SpmModel::Create(const Vocab* vocab, int32_t unk,
                                                   const std::string& source) {
  if (vocab->scores.size() != vocab->tokens.size()) {
    return InvalidArgument(source + ": SentencePiece vocabulary needs one score per token (" +
                           std::to_string(vocab->scores.size()) + " scores, " +
                           std::to_string(vocab->tokens.size()) + " tokens)");
  }
  std::unique_ptr<SpmModel> m(new SpmModel());
  m->vocab_ = vocab;
  m->unk_ = unk;
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    m->byte_ids_[b] = vocab->Find(buf);
  }
  return m;
}

namespace {

struct Sym {
  int32_t prev, next;
  size_t start, len;  // len 0: merged away
};

struct Bigram {
  float score;
  int32_t left, right;
  size_t size;
  bool operator<(const Bigram& o) const {  // pop highest score, then leftmost
    return score != o.score ? score < o.score : left > o.left;
  }
};

}  // namespace

void SpmModel::Encode(std::string_view piece, std::vector<int32_t>* out) const {
  std::vector<Sym> syms;
  size_t i = 0;
  while (i < piece.size()) {
    uint32_t cp;
    const size_t n = DecodeUtf8(piece, i, &cp);
    const int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({idx - 1, idx + 1, i, n});
    i += n;
  }
  if (syms.empty()) return;
  syms.back().next = -1;
  std::vector<Bigram> heap;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t size = syms[left].len + syms[right].len;
    const int32_t id = vocab_->Find(piece.substr(syms[left].start, size));
    if (id < 0) return;
    heap.push_back({vocab_->scores[id], left, right, size});
    std::push_heap(heap.begin(), heap.end());
  };
  for (int32_t k = 1; k < static_cast<int32_t>(syms.size()); ++k) try_add(k - 1, k);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Bigram b = heap.back();
    heap.pop_back();
    Sym& l = syms[b.left];
    Sym& r = syms[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.size || l.next != b.right) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int32_t k = 0; k >= 0; k = syms[k].next) {
    const std::string_view text = piece.substr(syms[k].start, syms[k].len);
    const int32_t id = vocab_->Find(text);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    for (char c : text) {
      const int32_t bid = byte_ids_[static_cast<uint8_t>(c)];
      if (bid >= 0) {
        out->push_back(bid);
      } else if (unk_ >= 0) {
        out->push_back(unk_);
      }
    }
  }
}

void WordPieceModel::Encode(std::string_view piece, std::vector<int32_t>* out) const {
  size_t chars = 0;
  for (char c : piece) chars += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  if (chars > max_chars_) {
    if (unk_ >= 0) out->push_back(unk_);
    return;
  }
  std::vector<int32_t> ids;
  std::string key;
  size_t start = 0;
  while (start < piece.size()) {
    size_t end = piece.size();
    int32_t found = -1;
    while (end > start) {
      key = start == 0 ? word_prefix_ : cont_prefix_;
      key.append(piece.substr(start, end - start));
      found = vocab_->Find(key);
      if (found >= 0) break;
      --end;
      while (end > start && (static_cast<uint8_t>(piece[end]) & 0xC0) == 0x80) --end;
    }
    if (found < 0) {
      if (unk_ >= 0) out->push_back(unk_);
      return;
    }
    ids.push_back(found);
    start = end;
  }
  out->insert(out->end(), ids.begin(), ids.end());
}

}  // namespace tachyon::tokenizer
