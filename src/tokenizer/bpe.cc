#include "tokenizer/bpe.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <queue>

#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {

void PairMap::Reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots_.assign(cap, Slot());
  mask_ = cap - 1;
  size_ = 0;
}

bool PairMap::Insert(int32_t a, int32_t b, int32_t rank, int32_t merged) {
  if ((size_ + 1) * 2 > slots_.size()) {
    std::vector<Slot> old = std::move(slots_);
    Reserve(old.size() + 16);
    for (const Slot& s : old) {
      if (s.key != kEmpty) {
        Insert(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key & 0xFFFFFFFF), s.rank,
               s.merged);
      }
    }
  }
  const uint64_t key = Key(a, b);
  size_t i = Hash(key) & mask_;
  while (slots_[i].key != kEmpty) {
    if (slots_[i].key == key) return false;
    i = (i + 1) & mask_;
  }
  slots_[i] = Slot{key, rank, merged};
  ++size_;
  return true;
}

namespace {

std::string ByteTokenSpelling(int b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
  return buf;
}

// Scratch buffers reused by every Encode on a thread.
struct MergeScratch {
  std::vector<int32_t> prev, next;
  struct Entry {
    int32_t rank, pos, left, right;
    bool operator<(const Entry& o) const {  // std::priority_queue pops the largest
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<Entry> heap;
  std::vector<int32_t> symbols;
};

MergeScratch& Scratch() {
  thread_local MergeScratch s;
  return s;
}

// Per-thread cache of piece -> ids for one model at a time (keyed by the model's serial, so a
// model built at a freed model's address never sees stale entries). Bounded: cleared when
// full. Words repeat heavily in real text, so most pieces skip merging entirely.
constexpr size_t kCacheMaxEntries = 1 << 16;
constexpr size_t kCacheMaxPieceBytes = 48;

struct PieceCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};

PieceCache& Cache() {
  thread_local PieceCache c;
  return c;
}

std::atomic<uint64_t> g_next_serial{1};

}  // namespace

Result<std::unique_ptr<BpeModel>> BpeModel::Create(
    const Vocab* vocab, const std::vector<std::pair<std::string, std::string>>& merges,
    const BpeOptions& options, const std::string& source) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  m->vocab_ = vocab;
  m->opt_ = options;
  m->serial_ = g_next_serial.fetch_add(1);
  for (int b = 0; b < 256; ++b) {
    m->byte_ids_[b] =
        options.byte_level
            ? vocab->Find(CodepointToUtf8(ByteToUnicode(static_cast<uint8_t>(b))))
            : (options.byte_fallback ? vocab->Find(ByteTokenSpelling(b)) : -1);
  }
  m->merges_.Reserve(merges.size());
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    const int32_t ia = vocab->Find(a), ib = vocab->Find(b);
    joined = a + b;
    const int32_t im = vocab->Find(joined);
    const std::string* missing = ia < 0 ? &a : ib < 0 ? &b : im < 0 ? &joined : nullptr;
    if (missing != nullptr) {
      return InvalidArgument(source + ": merge " + std::to_string(r) + " ('" + a + "' '" + b +
                             "') refers to token '" + *missing + "' that is not in the vocabulary");
    }
    m->merges_.Insert(ia, ib, static_cast<int32_t>(r), im);
  }
  if (options.byte_level && options.ignore_merges) {
    std::string raw;
    for (int32_t id = 0; id < vocab->size(); ++id) {
      raw.clear();
      const TokenType t = vocab->types.empty() ? TokenType::kNormal : vocab->types[id];
      if (t == TokenType::kControl || t == TokenType::kUserDefined) continue;
      if (ByteLevelToBytes(vocab->tokens[id], &raw) && !raw.empty()) {
        m->raw_index_.emplace(raw, id);
      }
    }
  }
  return m;
}

void BpeModel::Encode(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.empty()) return;
  if (piece.size() > kCacheMaxPieceBytes) {
    EncodeUncached(piece, out);
    return;
  }
  PieceCache& c = Cache();
  if (c.owner != serial_) {
    c.map.clear();
    c.owner = serial_;
  }
  auto it = c.map.find(piece);
  if (it != c.map.end()) {
    out->insert(out->end(), it->second.begin(), it->second.end());
    return;
  }
  const size_t start = out->size();
  EncodeUncached(piece, out);
  if (c.map.size() >= kCacheMaxEntries) c.map.clear();
  c.map.emplace(std::string(piece), std::vector<int32_t>(out->begin() + static_cast<std::ptrdiff_t>(start), out->end()));
}

void BpeModel::EncodeUncached(std::string_view piece, std::vector<int32_t>* out) const {
  if (opt_.ignore_merges) {
    if (opt_.byte_level) {
      auto it = raw_index_.find(piece);
      if (it != raw_index_.end()) {
        out->push_back(it->second);
        return;
      }
    } else {
      const int32_t id = vocab_->Find(piece);
      if (id >= 0 && vocab_->types[id] != TokenType::kControl &&
          vocab_->types[id] != TokenType::kUserDefined) {
        out->push_back(id);
        return;
      }
    }
  }
  MergeScratch& s = Scratch();
  std::vector<int32_t>& syms = s.symbols;
  syms.clear();
  if (opt_.byte_level) {
    for (char c : piece) {
      const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
      if (id >= 0) {
        syms.push_back(id);
      } else if (opt_.unk >= 0) {
        syms.push_back(opt_.unk);
      }
    }
  } else {
    size_t i = 0;
    bool prev_unk = false;
    while (i < piece.size()) {
      uint32_t cp;
      const size_t n = DecodeUtf8(piece, i, &cp);
      const int32_t id = vocab_->Find(piece.substr(i, n));
      if (id >= 0) {
        syms.push_back(id);
        prev_unk = false;
      } else {
        bool done = false;
        if (opt_.byte_fallback) {
          bool all = true;
          for (size_t k = i; k < i + n; ++k) all = all && byte_ids_[static_cast<uint8_t>(piece[k])] >= 0;
          if (all) {
            for (size_t k = i; k < i + n; ++k) syms.push_back(byte_ids_[static_cast<uint8_t>(piece[k])]);
            done = true;
            prev_unk = false;
          }
        }
        if (!done && opt_.unk >= 0) {
          if (!(opt_.fuse_unk && prev_unk)) syms.push_back(opt_.unk);
          prev_unk = true;
        }
      }
      i += n;
    }
  }
  Merge(&syms, out);
}

void BpeModel::Merge(std::vector<int32_t>* symbols, std::vector<int32_t>* out) const {
  std::vector<int32_t>& ids = *symbols;
  const int32_t n = static_cast<int32_t>(ids.size());
  if (n <= 1) {
    out->insert(out->end(), ids.begin(), ids.end());
    return;
  }
  MergeScratch& s = Scratch();
  s.prev.resize(n);
  s.next.resize(n);
  s.heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    s.prev[i] = i - 1;
    s.next[i] = i + 1 < n ? i + 1 : -1;
  }
  auto push_pair = [&](int32_t left) {
    const int32_t right = s.next[left];
    if (left < 0 || right < 0) return;
    int32_t rank, merged;
    if (merges_.Find(ids[left], ids[right], &rank, &merged)) {
      s.heap.push_back({rank, left, ids[left], ids[right]});
      std::push_heap(s.heap.begin(), s.heap.end());
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end());
    const MergeScratch::Entry e = s.heap.back();
    s.heap.pop_back();
    const int32_t right = s.next[e.pos];
    if (ids[e.pos] != e.left || right < 0 || ids[right] != e.right) continue;  // stale
    int32_t rank = 0, merged = 0;
    merges_.Find(e.left, e.right, &rank, &merged);
    ids[e.pos] = merged;
    ids[right] = -1;
    s.next[e.pos] = s.next[right];
    if (s.next[right] >= 0) s.prev[s.next[right]] = e.pos;
    if (s.prev[e.pos] >= 0) push_pair(s.prev[e.pos]);
    push_pair(e.pos);
  }
  for (int32_t i = 0; i >= 0; i = s.next[i]) out->push_back(ids[i]);
}

}  // namespace tachyon::tokenizer
