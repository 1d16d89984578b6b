// libFuzzer target: the disk KV tier (kv::DiskTier, docs/kv_tiers.md "Disk format") opening a
// directory whose one segment file holds arbitrary bytes. Whatever the file holds, Open must
// succeed, and every block it indexed must load (into a buffer of its recorded size) or fail
// with a Status, never crash; a block that loads must be the payload of a record of the file
// with that key. Then a block is stored after whatever the scan kept, and a reopen must load
// it. With the first byte's top bit set, the target first rewrites every record's checksums
// (header and payload) to the right ones, so the checks behind them (version, identity,
// sequence, sizes, end mark) are reached.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kv/disk_tier.h"
#include "util/xxh3.h"

namespace {

namespace fs = std::filesystem;
using tachyon::kv::BlockChunks;
using tachyon::kv::BlockHash;
using tachyon::kv::DiskTier;

constexpr BlockHash kIdentity{0x1111, 0x2222};
constexpr size_t kHeader = DiskTier::kRecordHeaderBytes;
constexpr size_t kMaxPayload = 1 << 16;  // larger records are not loaded (bounded memory)

struct Record {
  BlockHash key;
  size_t offset = 0;  // of its payload
  size_t bytes = 0;
};

uint64_t U64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

// The records as the format lays them out (header, payload as its size field says), walked
// from the start while a whole header fits; with `reseal`, each record's payload checksum (when
// its payload fits) and header checksum are rewritten to the right values.
std::vector<Record> Walk(std::vector<uint8_t>* b, bool reseal) {
  std::vector<Record> out;
  size_t at = 0;
  while (at + kHeader <= b->size()) {
    const uint64_t n = U64(*b, at + 48);
    const bool fits = n <= b->size() - at - kHeader;
    if (reseal) {
      if (fits) {
        const uint64_t h = tachyon::Xxh3(b->data() + at + kHeader, n);
        std::memcpy(b->data() + at + 56, &h, 8);
      }
      const uint64_t h = tachyon::Xxh3(b->data() + at, 64);
      std::memcpy(b->data() + at + 64, &h, 8);
    }
    if (!fits) break;
    out.push_back({BlockHash{U64(*b, at + 24), U64(*b, at + 32)}, at + kHeader, n});
    at += kHeader + n;
  }
  return out;
}

fs::path Dir() {
  static const fs::path dir =
      fs::temp_directory_path() / ("tachyon-kv-disk-fuzz-" + std::to_string(::getpid()));
  return dir;
}

void Load(DiskTier& t, const Record& r, const std::vector<uint8_t>& file) {
  if (r.bytes == 0 || r.bytes > kMaxPayload) return;
  std::vector<uint8_t> a(r.bytes / 2), b(r.bytes - r.bytes / 2);
  const std::span<uint8_t> chunks[] = {a, b};
  if (!t.Load(r.key, BlockChunks(chunks)).ok()) return;
  // Loaded: the bytes of some record of the file with that key (a later one may win).
  a.insert(a.end(), b.begin(), b.end());
  std::vector<uint8_t> copy = file;
  for (const Record& o : Walk(&copy, false)) {
    if (o.key == r.key && o.bytes == r.bytes &&
        std::memcmp(file.data() + o.offset, a.data(), a.size()) == 0) {
      return;
    }
  }
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<uint8_t> file(data + 1, data + size);
  const bool reseal = data[0] & 0x80;
  std::vector<Record> records = Walk(&file, reseal);
  std::error_code ec;
  fs::remove_all(Dir(), ec);
  fs::create_directories(Dir());
  char name[64];
  std::snprintf(name, sizeof(name), "%016llx-00000000.kvs",
                static_cast<unsigned long long>(kIdentity.hi));
  std::ofstream(Dir() / name, std::ios::binary)
      .write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  const int64_t capacity = (data[0] & 0x40) ? 4096 : int64_t{1} << 20;
  {
    auto t = DiskTier::Open(Dir(), capacity, kIdentity);
    if (!t.ok()) __builtin_trap();
    for (const Record& r : records) Load(**t, r, file);
    const std::vector<uint8_t> block(600, 0xab);
    (*t)->StoreOwned(BlockHash{7, 7}, block);
    (*t)->Flush();
  }
  auto t = DiskTier::Open(Dir(), capacity, kIdentity);
  if (!t.ok()) __builtin_trap();
  for (const Record& r : records) {
    if (r.key == BlockHash{7, 7}) return 0;  // the file's own block 7 may be the one held
  }
  std::vector<uint8_t> out(600);
  const std::span<uint8_t> chunks[] = {out};
  if (!(*t)->Load(BlockHash{7, 7}, BlockChunks(chunks)).ok() ||
      out != std::vector<uint8_t>(600, 0xab)) {
    __builtin_trap();
  }
  return 0;
}
