// On-disk cache of repacked weights (kernels/pack.h), so a model's second and later loads read
// the packed tensors instead of repacking them.
//
// One file per model file, <dir>/<model basename>-<16 hex digits>.tpack, where the digits
// hash the model's absolute path and the bytes of its GGUF header (metadata + tensor table).
// The file records the model's size and mtime, that header hash and kernels::kPackVersion;
// a file whose record, sizes or checksums (header, tensor table, and every tensor's bytes:
// xxh3-64) do not match is ignored, and the model is packed in memory and the file rewritten.
// Writing goes to a unique temporary file in the same folder that is renamed over the cache
// file, so readers only ever see a complete file, and two processes loading the same model at
// once each write a complete file (the last rename wins); a temporary file left by a process
// that died while writing is deleted by a later load once it is 10 minutes old. Nothing is
// written when the model's packed tensors total less than `min_bytes`, or when the file
// system would be left with less than `keep_free` bytes free (by default max(1 GiB, 5%);
// a warning says so).
//
// Location: TACHYON_PACK_CACHE=<dir> if set, else $XDG_CACHE_HOME/tachyon/packed, else
// $HOME/.cache/tachyon/packed. TACHYON_PACK_CACHE=0 (or "off") disables it. Clearing it is
// deleting the folder (or one .tpack file). See docs/kernels.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/pack.h"
#include "util/status.h"

namespace tachyon::model {

struct PackCacheOptions {
  std::string dir;                          // empty: no cache
  uint64_t min_bytes = uint64_t{64} << 20;  // smaller models repack in well under a second
  // Free bytes the file system must keep after the write; unset: max(1 GiB, 5% of its size).
  std::optional<uint64_t> keep_free;
  // Options from the environment (see the header comment).
  static PackCacheOptions FromEnv();
};

// A packed tensor: where its GGUF bytes start in the model file, and its shape.
struct PackKey {
  uint64_t file_offset = 0;
  uint32_t type = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  bool operator==(const PackKey&) const = default;
};

// Not thread-safe: one loader uses it.
class PackCache {
 public:
  // The cache for `file` (which must be the GGUF file mapped from file.path(): a file whose
  // header differs from the bytes on disk, e.g. converted in memory, gets no cache and null
  // is returned, as when options.dir is empty). A missing, stale or corrupt cache file is a
  // miss, never an error.
  static std::unique_ptr<PackCache> Open(const PackCacheOptions& options,
                                         const gguf::GgufFile& file);

  // The cached packed bytes of `key` (64-byte aligned, valid while this object lives), or
  // null when the cache file lacks it or holds a different size.
  const uint8_t* Find(const PackKey& key, size_t bytes);
  // Records a tensor packed in memory; `data` must stay valid until Save().
  void Add(const PackKey& key, const uint8_t* data, size_t bytes);
  // Writes the cache file when tensors were added (a miss or a partial hit) and the limits
  // allow; the file then holds exactly the tensors found or added in this load. OK when
  // nothing needed writing or writing was skipped for space / size; an error names the path.
  Status Save();

  const std::string& path() const { return path_; }
  bool loaded() const { return file_ != nullptr; }  // a valid cache file was read
  size_t hits() const { return hits_; }

 private:
  struct Entry {
    PackKey key;
    uint64_t offset = 0;  // in the cache file
    uint64_t bytes = 0;
    uint64_t hash = 0;
    const uint8_t* data = nullptr;  // while loading: read or in-memory bytes
  };
  PackCache() = default;
  // Deletes temporary files of this cache file left by a writer that died (untouched for
  // 10 minutes).
  void RemoveAbandonedTemporaries();
  // Maps path_ and checks it; false (with the reason in *why) when it is not usable.
  bool Load(std::string* why);

  PackCacheOptions options_;
  std::string path_;
  uint64_t model_size_ = 0;
  int64_t model_mtime_ns_ = 0;
  uint64_t header_hash_ = 0;
  // The cache file's bytes, read whole into memory from kernels::AllocateAligned: 2 MiB
  // aligned and on transparent huge pages where the kernel grants them, as packing in memory
  // places the tensors (a file mapping has 4 KiB pages: a SmolLM2-135M decode step's matmuls
  // took ~4-10% longer from them on Zen 3, bench/kernels_bench.cc DecodeChain/4k against /2m).
  // The price: processes serving the same model no longer share the file's page-cache pages.
  kernels::AlignedBuffer file_;
  std::vector<Entry> cached_;  // entries of the file read
  std::vector<Entry> used_;    // found or added in this load, in order
  size_t hits_ = 0;
  bool dirty_ = false;
};

}  // namespace tachyon::model
