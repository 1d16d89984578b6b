#include "kv/disk_tier.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "kv/kv_events.h"
#include "util/logging.h"
#include "util/xxh3.h"

namespace tachyon::kv {
namespace fs = std::filesystem;
namespace {
using Clock = std::chrono::steady_clock;
constexpr char kMagic[4] = {'T', 'K', 'V', 'B'};
constexpr size_t kHeaderBytes = 64;
constexpr char kExt[] = ".kvb";
constexpr char kTmpExt[] = ".kvb.tmp";

struct Header {
  char magic[4];
  uint32_t version;
  uint64_t identity_lo, identity_hi;
  uint64_t key_lo, key_hi;
  uint64_t payload_bytes;
  uint64_t payload_hash;
  uint64_t header_hash;  // of the 56 bytes above
};
static_assert(sizeof(Header) == kHeaderBytes, "the disk tier's header is 64 bytes");

uint64_t HeaderHash(const Header& h) {
  return XXH3_64bits(&h, offsetof(Header, header_hash));
}

std::string Hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool ReadAll(int fd, uint8_t* p, size_t n, off_t off) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, off);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    off += r;
  }
  return true;
}

bool WriteAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads and checks a file's header. Errors: DataLoss (not a valid block file).
Result<Header> ReadHeader(int fd, int64_t file_bytes) {
  Header h;
  if (file_bytes < static_cast<int64_t>(kHeaderBytes) ||
      !ReadAll(fd, reinterpret_cast<uint8_t*>(&h), kHeaderBytes, 0)) {
    return DataLoss("truncated header");
  }
  if (std::memcmp(h.magic, kMagic, 4) != 0) return DataLoss("not a KV block file");
  if (h.header_hash != HeaderHash(h)) return DataLoss("header checksum mismatch");
  if (h.version != DiskTier::kVersion) return DataLoss("unknown version");
  if (static_cast<uint64_t>(file_bytes) != kHeaderBytes + h.payload_bytes) {
    return DataLoss("file size does not match its header");
  }
  return h;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};
}  // namespace

DiskTier::DiskTier(fs::path dir, int64_t capacity, const BlockHash& identity)
    : dir_(std::move(dir)),
      capacity_(capacity),
      identity_(identity),
      queue_budget_(std::min<int64_t>(capacity, int64_t{256} << 20)),
      buffers_(std::make_shared<BufferPool>(int64_t{64} << 20)) {
  stats_.capacity_bytes = capacity_;
}

void DiskTier::ShareBuffers(std::shared_ptr<BufferPool> pool) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pool) buffers_ = std::move(pool);
}

Result<std::unique_ptr<DiskTier>> DiskTier::Open(const fs::path& dir, int64_t capacity_bytes,
                                                 const BlockHash& identity) {
  if (capacity_bytes <= 0)
    return InvalidArgument("--kv-offload-disk: the disk KV tier's bound must be positive");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    return InvalidArgument("--kv-offload-dir " + dir.string() +
                           ": cannot create the directory: " + ec.message());
  }
  std::unique_ptr<DiskTier> t(new DiskTier(dir, capacity_bytes, identity));
  RETURN_IF_ERROR(t->Scan());
  t->Probe();
  t->writer_ = std::thread([p = t.get()] {
    pthread_setname_np(pthread_self(), "kv-disk-write");
    p->WriterLoop();
  });
  return t;
}

DiskTier::~DiskTier() {
  Flush();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

fs::path DiskTier::PathOf(const BlockHash& key) const {
  return dir_ / (Hex16(identity_.hi) + "-" + BlockHashHex(key) + kExt);
}

Status DiskTier::Scan() {
  struct Found {
    BlockHash key;
    int64_t bytes;
    fs::file_time_type mtime;
  };
  std::vector<Found> found;
  std::error_code ec;
  fs::directory_iterator it(dir_, ec);
  if (ec) return Unavailable("--kv-offload-dir " + dir_.string() + ": " + ec.message());
  for (const fs::directory_entry& e : it) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file(ec)) continue;
    const auto ends_with = [&](std::string_view s) {
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    if (ends_with(kTmpExt)) {  // a write cut short
      fs::remove(e.path(), ec);
      ++removed_;
      continue;
    }
    if (!ends_with(kExt)) continue;
    const int64_t size = static_cast<int64_t>(e.file_size(ec));
    Fd fd(::open(e.path().c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) continue;
    Result<Header> h = ReadHeader(fd.get(), size);
    if (!h.ok()) {
      TLOG(WARN) << "disk KV tier: removing " << e.path().string() << ": " << h.status().message();
      fs::remove(e.path(), ec);
      ++removed_;
      continue;
    }
    const BlockHash key{h->key_lo, h->key_hi};
    if (h->identity_lo != identity_.lo || h->identity_hi != identity_.hi ||
        e.path() != PathOf(key)) {
      ++ignored_;  // another model's (or misnamed): never used, left alone
      continue;
    }
    found.push_back({key, size, e.last_write_time(ec)});
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime > b.mtime; });  // newest first
  for (const Found& f : found) {
    if (bytes_ + f.bytes > capacity_) {  // over the bound (e.g. lowered since): drop the oldest
      fs::remove(PathOf(f.key), ec);
      ++removed_;
      continue;
    }
    lru_.push_back(f.key);
    index_[f.key] = Meta{f.bytes, std::prev(lru_.end())};
    bytes_ += f.bytes;
    ++scanned_;
  }
  return OkStatus();
}

void DiskTier::Probe() {
  constexpr size_t kBytes = 1u << 20;
  const fs::path p = dir_ / ".probe.kvb.tmp";
  std::vector<uint8_t> buf(kBytes, 7);
  {
    Fd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0 || !WriteAll(fd.get(), buf.data(), kBytes)) return;
  }
  const auto t = Clock::now();
  {
    Fd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() >= 0 && ReadAll(fd.get(), buf.data(), kBytes, 0)) {
      (void)Xxh3(buf.data(), kBytes);  // a load checks the checksum too
      probe_seconds_per_byte_ = std::chrono::duration<double>(Clock::now() - t).count() / kBytes;
    }
  }
  std::error_code ec;
  fs::remove(p, ec);
}

void DiskTier::Touch(const BlockHash& key) {
  auto it = index_.find(key);
  if (it != index_.end()) lru_.splice(lru_.begin(), lru_, it->second.lru);
}

void DiskTier::ForgetLocked(const BlockHash& key, bool remove_file) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  index_.erase(it);
  if (remove_file) {
    std::error_code ec;
    fs::remove(PathOf(key), ec);
  }
}

size_t DiskTier::Lookup(std::span<const BlockHash> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  while (n < keys.size() && (index_.count(keys[n]) || queued_.count(keys[n]))) ++n;
  if (n < keys.size()) ++stats_.misses;
  return n;
}

Status DiskTier::Load(const BlockHash& key, BlockChunks dst) {
  const auto t = Clock::now();
  const size_t want = TotalBytes(dst);
  auto fail = [&](Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.load_failures;
    return s;
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto q = queued_.find(key);
    if (q != queued_.end()) {  // not written yet: from memory
      const std::vector<uint8_t>& b = *q->second;
      if (b.size() != want) {
        ++stats_.load_failures;
        return InvalidArgument("disk KV tier: block of " + std::to_string(b.size()) +
                               " bytes loaded into " + std::to_string(want));
      }
      size_t off = 0;
      for (const auto& c : dst) {
        std::memcpy(c.data(), b.data() + off, c.size());
        off += c.size();
      }
      ++stats_.hits;
      return OkStatus();
    }
    if (!index_.count(key)) {
      ++stats_.load_failures;
      return NotFound("disk KV tier: block " + BlockHashHex(key) + " is not held");
    }
  }
  const fs::path path = PathOf(key);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    std::lock_guard<std::mutex> lock(mu_);
    ForgetLocked(key, false);
    ++stats_.load_failures;
    return NotFound("disk KV tier: " + path.string() + " is gone");
  }
  std::error_code ec;
  const int64_t size = static_cast<int64_t>(fs::file_size(path, ec));
  Result<Header> h = ReadHeader(fd.get(), ec ? 0 : size);
  Status bad = h.ok() ? OkStatus() : h.status();
  if (bad.ok() && (h->identity_lo != identity_.lo || h->identity_hi != identity_.hi ||
                   h->key_lo != key.lo || h->key_hi != key.hi)) {
    bad = DataLoss("the header names another block or model");
  }
  if (bad.ok() && h->payload_bytes != want) {
    return fail(InvalidArgument("disk KV tier: block of " + std::to_string(h->payload_bytes) +
                                " bytes loaded into " + std::to_string(want)));
  }
  if (bad.ok()) {
    Xxh3Stream st;
    off_t off = kHeaderBytes;
    for (const auto& c : dst) {
      if (!ReadAll(fd.get(), c.data(), c.size(), off)) {
        bad = DataLoss("short read");
        break;
      }
      st.Update(c.data(), c.size());
      off += static_cast<off_t>(c.size());
    }
    if (bad.ok() && st.Digest() != h->payload_hash) bad = DataLoss("payload checksum mismatch");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!bad.ok()) {
    TLOG(WARN) << "disk KV tier: removing " << path.string() << ": " << bad.message();
    ForgetLocked(key, true);
    ++stats_.load_failures;
    return DataLoss("disk KV tier: " + path.string() + ": " + std::string(bad.message()));
  }
  Touch(key);
  const double s = std::chrono::duration<double>(Clock::now() - t).count();
  ++stats_.hits;
  stats_.load_seconds += s;
  load_ema_ = load_ema_ == 0 ? s : 0.8 * load_ema_ + 0.2 * s;
  return OkStatus();
}

void DiskTier::Store(const BlockHash& key, BlockChunks src) {
  std::shared_ptr<BufferPool> pool;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (index_.count(key) || queued_.count(key)) {
      Touch(key);
      return;
    }
    pool = buffers_;
  }
  std::vector<uint8_t> bytes = pool->Take();
  CopyChunksInto(src, &bytes);
  StoreOwned(key, std::move(bytes));
}

void DiskTier::StoreOwned(const BlockHash& key, std::vector<uint8_t> bytes) {
  std::shared_ptr<BufferPool> declined_to;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t n = static_cast<int64_t>(bytes.size());
    if (index_.count(key) || queued_.count(key)) {
      Touch(key);
      declined_to = buffers_;
    } else if (n + static_cast<int64_t>(kHeaderBytes) > capacity_ ||
               queued_bytes_ + n > queue_budget_) {
      declined_to = buffers_;  // larger than the tier, or the writer is that far behind
      ++stats_.declined;
    } else {
      queue_.push_back(Pending{key, std::move(bytes), false});
      queued_[key] = &queue_.back().bytes;
      queued_bytes_ += n;
      ++unclaimed_;
      last_block_bytes_ = static_cast<size_t>(n);
    }
  }
  if (declined_to) {
    declined_to->Give(std::move(bytes));
    return;
  }
  cv_.notify_all();
}

void DiskTier::WriterLoop() {
  // Idle priority: the writes use the CPU time the engine leaves; when it leaves none, the
  // queue fills and further blocks are declined. A Flush writes on its caller's thread.
  sched_param idle{};
  if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle) != 0) {
    TLOG(INFO) << "disk KV tier: the writer runs at normal priority (SCHED_IDLE refused)";
  }
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || unclaimed_ > 0; });
    if (!WriteOne(lock)) return;  // stop_ and nothing left to write
  }
}

bool DiskTier::WriteOne(std::unique_lock<std::mutex>& lock) {
  if (unclaimed_ == 0) return false;
  auto it = queue_.begin();
  while (it->claimed) ++it;
  it->claimed = true;
  --unclaimed_;
  // A claimed entry stays put and unchanged (only its claimer erases it), so it is written
  // unlocked; Load may read its bytes meanwhile.
  const Pending& p = *it;
  lock.unlock();
  Header h{};
  std::memcpy(h.magic, kMagic, 4);
  h.version = kVersion;
  h.identity_lo = identity_.lo;
  h.identity_hi = identity_.hi;
  h.key_lo = p.key.lo;
  h.key_hi = p.key.hi;
  h.payload_bytes = p.bytes.size();
  h.payload_hash = Xxh3(p.bytes.data(), p.bytes.size());
  h.header_hash = HeaderHash(h);
  const fs::path path = PathOf(p.key);
  fs::path tmp = path;
  tmp += ".tmp";
  bool ok = false;
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    ok = fd.get() >= 0 && WriteAll(fd.get(), reinterpret_cast<const uint8_t*>(&h), kHeaderBytes) &&
         WriteAll(fd.get(), p.bytes.data(), p.bytes.size());
  }
  std::error_code ec;
  if (ok) {
    fs::rename(tmp, path, ec);
    ok = !ec;
  }
  if (!ok) {
    fs::remove(tmp, ec);
    static std::atomic<int> warned{0};
    if (warned.fetch_add(1) == 0) TLOG(WARN) << "disk KV tier: cannot write " << path.string();
  }
  std::vector<BlockHash> evicted;
  lock.lock();
  const BlockHash key = p.key;
  const int64_t n = static_cast<int64_t>(p.bytes.size());
  if (ok) {
    lru_.push_front(key);
    index_[key] = Meta{n + static_cast<int64_t>(kHeaderBytes), lru_.begin()};
    bytes_ += n + static_cast<int64_t>(kHeaderBytes);
    ++stats_.stores;
    while (bytes_ > capacity_ && !lru_.empty()) {
      const BlockHash victim = lru_.back();
      ForgetLocked(victim, false);
      evicted.push_back(victim);
      ++stats_.evictions;
    }
  }
  if (!evicted.empty()) {
    lock.unlock();
    for (const BlockHash& v : evicted) fs::remove(PathOf(v), ec);
    lock.lock();
  }
  // Erased last, so Flush returns only once the block and its evictions are on disk.
  queued_.erase(key);
  queued_bytes_ -= n;
  buffers_->Give(std::move(it->bytes));
  queue_.erase(it);
  cv_.notify_all();  // Flush waits for the queue to empty
  return true;
}

void DiskTier::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!queue_.empty()) {
    if (!WriteOne(lock)) cv_.wait(lock);  // the rest is being written by others
  }
}

double DiskTier::LoadSecondsPerBlock() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (load_ema_ > 0) return load_ema_;
  return probe_seconds_per_byte_ * static_cast<double>(last_block_bytes_);
}

BlockStoreStats DiskTier::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BlockStoreStats s = stats_;
  s.blocks = static_cast<int64_t>(index_.size() + queued_.size());
  s.bytes = bytes_ + queued_bytes_;
  return s;
}

Result<BlockHash> ModelKvIdentity(const fs::path& model_path, std::string_view kv_format) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_directory(model_path, ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(model_path, ec)) {
      if (e.is_regular_file(ec)) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(model_path);
  }
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  XXH3_128bits_update(st, kv_format.data(), kv_format.size());
  std::vector<uint8_t> buf(1u << 20);
  for (const fs::path& f : files) {
    const std::string name = f.filename().string();
    XXH3_128bits_update(st, name.data(), name.size() + 1);
    Fd fd(::open(f.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      XXH3_freeState(st);
      return Unavailable("cannot read " + f.string() + " for the KV identity");
    }
    while (true) {
      const ssize_t r = ::read(fd.get(), buf.data(), buf.size());
      if (r < 0) {
        XXH3_freeState(st);
        return Unavailable("cannot read " + f.string() + " for the KV identity");
      }
      if (r == 0) break;
      XXH3_128bits_update(st, buf.data(), static_cast<size_t>(r));
    }
  }
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return BlockHash{h.low64, h.high64};
}

}  // namespace tachyon::kv
