// Cache file layout (little-endian; all offsets from the start of the file):
//   [0, 4096)        FileHeader (below), zero-padded
//   entries' bytes   each at a multiple of 4096, in table order
//   table            entry_count x FileEntry, at table_offset (a multiple of 8)
// The header's own checksum covers its fields before `header_hash_self`; table_hash covers
// the table; each entry's hash covers its bytes.
#include "model/pack_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "kernels/pack.h"
#include "util/logging.h"
#include "util/thread_pool.h"
#include "util/xxh3.h"

namespace tachyon::model {
namespace {

constexpr char kMagic[8] = {'T', 'A', 'C', 'H', 'P', 'A', 'C', 'K'};
constexpr uint32_t kFormatVersion = 1;
constexpr uint64_t kAlign = 4096;

struct FileHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t pack_version;  // kernels::kPackVersion
  uint64_t model_size;
  int64_t model_mtime_ns;
  uint64_t header_hash;  // xxh3-64 of the model's GGUF bytes [0, data_offset)
  uint64_t file_size;    // of this cache file
  uint64_t table_offset;
  uint64_t entry_count;
  uint64_t table_hash;
  uint64_t header_hash_self;  // xxh3-64 of the bytes above
};
static_assert(sizeof(FileHeader) == 80);

struct FileEntry {
  uint64_t file_offset;  // PackKey
  uint32_t type;
  uint32_t reserved;
  int64_t rows;
  int64_t cols;
  uint64_t offset;  // of the bytes in the cache file
  uint64_t bytes;
  uint64_t hash;  // xxh3-64 of the bytes
};
static_assert(sizeof(FileEntry) == 56);

uint64_t AlignUp(uint64_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

std::string Hex16(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[i] = digits[v & 15];
  return s;
}

// Runs work() on n threads (this one and n - 1 more) and waits for them.
template <typename Work>
void OnThreads(int n, const Work& work) {
  std::vector<std::thread> threads;
  for (int t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
}

// Hashes every entry's bytes on all hardware threads (entries handed out one at a time:
// their sizes differ a lot). Returns false if any differs from its recorded hash.
bool HashesMatch(const std::vector<const uint8_t*>& data, const std::vector<uint64_t>& bytes,
                 const std::vector<uint64_t>& want) {
  std::atomic<size_t> next{0};
  std::atomic<bool> ok{true};
  auto work = [&] {
    for (size_t i = next++; i < data.size() && ok; i = next++) {
      if (Xxh3(data[i], bytes[i]) != want[i]) ok = false;
    }
  };
  OnThreads(std::max(1, std::min<int>(HardwareThreads(), static_cast<int>(data.size()))), work);
  return ok;
}

// Reads [0, size) of fd into dst on all hardware threads, in 8 MiB pieces handed out one at a
// time: the page faults of a fresh buffer (on huge pages, each zeroes 2 MiB) then run on every
// core, not only on the loading thread. False on a read error or a short file.
bool ReadAll(int fd, uint8_t* dst, size_t size) {
  constexpr size_t kPiece = size_t{8} << 20;
  const size_t pieces = (size + kPiece - 1) / kPiece;
  std::atomic<size_t> next{0};
  std::atomic<bool> ok{true};
  auto work = [&] {
    for (size_t i = next++; i < pieces && ok; i = next++) {
      size_t off = i * kPiece;
      const size_t end = std::min(size, off + kPiece);
      while (off < end) {
        const ssize_t r = pread(fd, dst + off, end - off, static_cast<off_t>(off));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
          ok = false;
          break;
        }
        off += static_cast<size_t>(r);
      }
    }
  };
  OnThreads(std::max(1, std::min<int>(HardwareThreads(), static_cast<int>(pieces))), work);
  return ok;
}

bool WriteAll(int fd, const void* p, size_t n, uint64_t offset) {
  const auto* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    const ssize_t w =
        pwrite(fd, b, std::min<size_t>(n, size_t{1} << 30), static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return true;
}

}  // namespace

PackCacheOptions PackCacheOptions::FromEnv() {
  PackCacheOptions o;
  const char* v = std::getenv("TACHYON_PACK_CACHE");
  if (v != nullptr && *v != '\0') {
    const std::string s(v);
    if (s == "0" || s == "off" || s == "false" || s == "no") return o;
    // "1" / "on" mean the default location (not a folder named "1" in the current directory).
    if (s != "1" && s != "on" && s != "true" && s != "yes") {
      o.dir = s;
      return o;
    }
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x == '/') {
    o.dir = std::string(x) + "/tachyon/packed";
  } else if (const char* h = std::getenv("HOME"); h != nullptr && *h == '/') {
    o.dir = std::string(h) + "/.cache/tachyon/packed";
  }
  return o;
}

std::unique_ptr<PackCache> PackCache::Open(const PackCacheOptions& options,
                                           const gguf::GgufFile& file) {
  if (options.dir.empty()) return nullptr;
  std::error_code ec;
  const std::filesystem::path model = std::filesystem::absolute(file.path(), ec);
  if (ec) return nullptr;
  struct stat st;
  if (stat(model.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) != file.file_size()) {
    return nullptr;
  }
  // The header in memory must be the one on disk (the tensors are then the file's bytes).
  const size_t header_bytes = file.data_offset();
  std::vector<uint8_t> disk(header_bytes);
  const int fd = open(model.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  size_t got = 0;
  while (got < header_bytes) {
    const ssize_t r = pread(fd, disk.data() + got, header_bytes - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  close(fd);
  if (got != header_bytes || file.tensors().empty()) return nullptr;
  const uint8_t* mem =
      file.TensorData(file.tensors()[0]) - file.tensors()[0].offset - file.data_offset();
  if (std::memcmp(mem, disk.data(), header_bytes) != 0) return nullptr;

  std::unique_ptr<PackCache> c(new PackCache());
  c->options_ = options;
  c->model_size_ = static_cast<uint64_t>(st.st_size);
  c->model_mtime_ns_ = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  c->header_hash_ = XXH3_64bits(disk.data(), header_bytes);
  const std::string id = model.string() + '\n' + Hex16(c->header_hash_);
  std::string base = model.filename().string();
  for (char& ch : base) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-') {
      ch = '_';
    }
  }
  c->path_ = options.dir + "/" + base + "-" + Hex16(XXH3_64bits(id.data(), id.size())) + ".tpack";
  c->RemoveAbandonedTemporaries();
  std::string why;
  if (!c->Load(&why)) {
    c->file_.reset();
    c->cached_.clear();
    if (!why.empty()) TLOG(WARN) << "packed-weight cache " << c->path_ << " ignored: " << why;
  }
  return c;
}

void PackCache::RemoveAbandonedTemporaries() {
  const std::string prefix = std::filesystem::path(path_).filename().string() + ".tmp.";
  const auto now = std::filesystem::file_time_type::clock::now();
  std::error_code ec;
  for (std::filesystem::directory_iterator it(options_.dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    std::error_code ec2;
    const auto mtime = std::filesystem::last_write_time(it->path(), ec2);
    // A writer still at work touches its file continuously; one untouched for 10 minutes
    // was left by a process that died while writing.
    if (!ec2 && now - mtime > std::chrono::minutes(10)) {
      std::filesystem::remove(it->path(), ec2);
      if (!ec2) TLOG(INFO) << "removed abandoned packed-weight cache temporary " << it->path();
    }
  }
}

bool PackCache::Load(std::string* why) {
  const int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) *why = std::strerror(errno);
    return false;  // ENOENT: no cache yet, a plain miss
  }
  struct stat st;
  size_t size = 0;
  bool read = false;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    size = static_cast<size_t>(st.st_size);
    file_ = kernels::AllocateAligned(size);
    read = file_ != nullptr && ReadAll(fd, file_.get(), size);
  }
  close(fd);
  if (!read) {
    *why = size > 0 && file_ == nullptr ? "out of memory" : "not a readable file";
    return false;
  }
  const uint8_t* p = file_.get();
  FileHeader h;
  if (size < kAlign) {
    *why = "truncated";
    return false;
  }
  std::memcpy(&h, p, sizeof(h));
  if (std::memcmp(h.magic, kMagic, 8) != 0 ||
      XXH3_64bits(&h, offsetof(FileHeader, header_hash_self)) != h.header_hash_self) {
    *why = "bad header";
    return false;
  }
  if (h.format_version != kFormatVersion || h.pack_version != kernels::kPackVersion) {
    *why = "written by another version";
    return false;
  }
  if (h.model_size != model_size_ || h.model_mtime_ns != model_mtime_ns_ ||
      h.header_hash != header_hash_) {
    *why = "the model file changed";
    return false;
  }
  if (h.file_size != size || h.table_offset % 8 != 0 || h.table_offset > size ||
      h.entry_count > (size - h.table_offset) / sizeof(FileEntry) ||
      h.table_offset + h.entry_count * sizeof(FileEntry) != size) {
    *why = "truncated or inconsistent sizes";
    return false;
  }
  const uint8_t* table = p + h.table_offset;
  if (XXH3_64bits(table, h.entry_count * sizeof(FileEntry)) != h.table_hash) {
    *why = "bad tensor table";
    return false;
  }
  std::vector<const uint8_t*> data;
  std::vector<uint64_t> bytes, hashes;
  for (uint64_t i = 0; i < h.entry_count; ++i) {
    FileEntry fe;
    std::memcpy(&fe, table + i * sizeof(FileEntry), sizeof(fe));
    if (fe.offset % kAlign != 0 || fe.offset < kAlign || fe.offset > h.table_offset ||
        fe.bytes > h.table_offset - fe.offset) {
      *why = "tensor outside the file";
      return false;
    }
    Entry e;
    e.key = {fe.file_offset, fe.type, fe.rows, fe.cols};
    e.offset = fe.offset;
    e.bytes = fe.bytes;
    e.hash = fe.hash;
    e.data = p + fe.offset;
    cached_.push_back(e);
    data.push_back(e.data);
    bytes.push_back(e.bytes);
    hashes.push_back(e.hash);
  }
  if (!HashesMatch(data, bytes, hashes)) {
    *why = "tensor bytes do not match their checksums";
    return false;
  }
  return true;
}

const uint8_t* PackCache::Find(const PackKey& key, size_t bytes) {
  for (const Entry& e : cached_) {
    if (e.key == key) {
      if (e.bytes != bytes) return nullptr;
      used_.push_back(e);
      ++hits_;
      return e.data;
    }
  }
  return nullptr;
}

void PackCache::Add(const PackKey& key, const uint8_t* data, size_t bytes) {
  Entry e;
  e.key = key;
  e.bytes = bytes;
  e.data = data;
  used_.push_back(e);
  dirty_ = true;
}

Status PackCache::Save() {
  // A complete hit on a file holding nothing else is already on disk.
  if (!dirty_ && used_.size() == cached_.size()) return OkStatus();
  if (used_.empty()) return OkStatus();
  uint64_t total = kAlign;
  for (Entry& e : used_) {
    e.offset = total;
    total = AlignUp(total + e.bytes);
  }
  const uint64_t table_offset = total;
  total += used_.size() * sizeof(FileEntry);
  uint64_t payload = 0;
  for (const Entry& e : used_) payload += e.bytes;
  if (payload < options_.min_bytes) return OkStatus();
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  if (ec)
    return Unavailable(options_.dir +
                       ": cannot create the packed-weight cache folder: " + ec.message());
  struct statvfs vfs;
  if (statvfs(options_.dir.c_str(), &vfs) == 0) {
    const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    const uint64_t fs = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
    const uint64_t reserve =
        options_.keep_free.value_or(std::max<uint64_t>(uint64_t{1} << 30, fs / 20));
    if (avail < total + reserve) {
      TLOG(WARN) << "packed-weight cache not written: " << path_ << " needs " << total / (1 << 20)
                 << " MiB and " << options_.dir << " has " << avail / (1 << 20)
                 << " MiB free (keeping " << reserve / (1 << 20) << " MiB free)";
      return OkStatus();
    }
  }
  std::string tmp = path_ + ".tmp.XXXXXX";
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return Unavailable(tmp + ": " + std::strerror(errno));
  bool ok = true;
  std::vector<FileEntry> table;
  for (Entry& e : used_) {
    e.hash = Xxh3(e.data, e.bytes);
    table.push_back(
        {e.key.file_offset, e.key.type, 0, e.key.rows, e.key.cols, e.offset, e.bytes, e.hash});
    ok = ok && WriteAll(fd, e.data, e.bytes, e.offset);
  }
  const size_t table_bytes = table.size() * sizeof(FileEntry);
  ok = ok && WriteAll(fd, table.data(), table_bytes, table_offset);
  FileHeader h{};
  std::memcpy(h.magic, kMagic, 8);
  h.format_version = kFormatVersion;
  h.pack_version = kernels::kPackVersion;
  h.model_size = model_size_;
  h.model_mtime_ns = model_mtime_ns_;
  h.header_hash = header_hash_;
  h.file_size = total;
  h.table_offset = table_offset;
  h.entry_count = table.size();
  h.table_hash = XXH3_64bits(table.data(), table_bytes);
  h.header_hash_self = XXH3_64bits(&h, offsetof(FileHeader, header_hash_self));
  std::vector<uint8_t> page(kAlign, 0);
  std::memcpy(page.data(), &h, sizeof(h));
  // Header last: a file cut short by a crash fails the size and checksum checks.
  ok = ok && WriteAll(fd, page.data(), page.size(), 0);
  ok = ok && ftruncate(fd, static_cast<off_t>(total)) == 0;
  const int err = errno;
  close(fd);
  if (!ok || rename(tmp.c_str(), path_.c_str()) != 0) {
    const std::string msg = std::strerror(ok ? errno : err);
    unlink(tmp.c_str());
    return Unavailable(path_ + ": cannot write the packed-weight cache: " + msg);
  }
  TLOG(INFO) << "wrote packed-weight cache " << path_ << " (" << total / (1 << 20)
             << " MiB; TACHYON_PACK_CACHE=0 disables it, deleting the file clears it)";
  dirty_ = false;
  return OkStatus();
}

}  // namespace tachyon::model
