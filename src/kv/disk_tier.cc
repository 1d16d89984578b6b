#include "kv/disk_tier.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
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
constexpr int64_t kHeaderBytes = DiskTier::kRecordHeaderBytes;
constexpr char kExt[] = ".kvs";
constexpr char kOldExt[] = ".kvb";         // format 1: one file per block
constexpr char kOldTmpExt[] = ".kvb.tmp";  // format 1's writes cut short
constexpr char kProbeName[] = ".probe.tmp";

struct Header {
  char magic[4];
  uint32_t version;
  uint64_t identity_lo, identity_hi;
  uint64_t key_lo, key_hi;
  uint64_t seq;
  uint64_t payload_bytes;
  uint64_t payload_hash;
  uint64_t header_hash;  // of the 64 bytes above
};
static_assert(sizeof(Header) == kHeaderBytes, "the disk tier's record header is 72 bytes");
const Header kEndMark{};  // all zero: no record follows
// Sequences at or past it are refused, so the next one never wraps.
constexpr uint64_t kMaxSeq = uint64_t{1} << 62;

uint64_t HeaderHash(const Header& h) {
  return Xxh3(&h, offsetof(Header, header_hash));
}

bool IsEndMark(const Header& h) {
  return std::memcmp(&h, &kEndMark, sizeof(Header)) == 0;
}

// Why `h`, read at `offset` of a file of `file_bytes`, is not a well-formed record; empty if
// it is one (of any identity).
std::string_view HeaderProblem(const Header& h, int64_t offset, int64_t file_bytes) {
  if (std::memcmp(h.magic, kMagic, 4) != 0) return "not a record header";
  if (h.header_hash != HeaderHash(h)) return "header checksum mismatch";
  if (h.version != DiskTier::kVersion) return "unknown version";
  if (h.payload_bytes > static_cast<uint64_t>(file_bytes) ||
      offset + kHeaderBytes + static_cast<int64_t>(h.payload_bytes) > file_bytes) {
    return "truncated record";
  }
  return {};
}

std::string Hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool EndsWith(std::string_view s, std::string_view end) {
  return s.size() >= end.size() && s.substr(s.size() - end.size()) == end;
}

// preadv / pwritev of all of `iov` at `off`, resuming after partial transfers; false on an
// error or end of file. Advances the entries of `iov`.
template <bool kWrite>
bool TransferAll(int fd, std::span<iovec> iov, off_t off) {
  size_t i = 0;
  while (i < iov.size() && iov[i].iov_len == 0) ++i;
  while (i < iov.size()) {
    const int n = static_cast<int>(std::min<size_t>(iov.size() - i, IOV_MAX));
    const ssize_t r =
        kWrite ? ::pwritev(fd, iov.data() + i, n, off) : ::preadv(fd, iov.data() + i, n, off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    off += r;
    size_t left = static_cast<size_t>(r);
    while (i < iov.size() && left >= iov[i].iov_len) left -= iov[i++].iov_len;
    if (i < iov.size()) {
      iov[i].iov_base = static_cast<uint8_t*>(iov[i].iov_base) + left;
      iov[i].iov_len -= left;
    }
  }
  return true;
}

bool ReadAt(int fd, void* p, size_t n, off_t off) {
  iovec iov{p, n};
  return TransferAll<false>(fd, std::span<iovec>(&iov, 1), off);
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

void WarnWriteFailure(const fs::path& path) {
  static std::atomic<int> warned{0};
  if (warned.fetch_add(1) == 0) TLOG(WARN) << "disk KV tier: cannot write " << path.string();
}
}  // namespace

// One segment file. Its fd stays open while anyone (a Load in progress) holds the segment.
struct DiskTier::Segment {
  uint32_t number = 0;
  int fd = -1;
  int64_t end = 0;         // where this lap's records end: the next record goes here
  int64_t file_bytes = 0;  // the file's size (this lap's records, the end mark, stale bytes)
  uint64_t first_seq = 0;  // this lap's first record's sequence (0: none)
  uint64_t last_seq = 0;
  uint64_t gen = 0;     // bumped when its blocks are dropped: a load reading it meanwhile fails
  bool closed = false;  // a write failed: no more records go here
  std::vector<BlockHash> keys;  // this lap's records (the index may point elsewhere since)
  explicit Segment(int fd_in) : fd(fd_in) {}
  ~Segment() { ::close(fd); }
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
};

DiskTier::DiskTier(fs::path dir, int64_t capacity, const BlockHash& identity)
    : dir_(std::move(dir)),
      capacity_(capacity),
      identity_(identity),
      queue_budget_(std::min<int64_t>(capacity, int64_t{256} << 20)),
      segment_bytes_(std::min<int64_t>(capacity / 16, int64_t{256} << 20)),
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

fs::path DiskTier::SegmentPath(uint32_t number) const {
  char n[9];
  std::snprintf(n, sizeof(n), "%08x", number);
  return dir_ / (Hex16(identity_.hi) + "-" + n + kExt);
}

DiskTier::SegmentScan DiskTier::ScanSegment(Segment& seg, std::vector<Meta>* records,
                                            std::vector<BlockHash>* keys) {
  const int64_t size = static_cast<int64_t>(::lseek(seg.fd, 0, SEEK_END));
  seg.file_bytes = std::max<int64_t>(size, 0);
  int64_t off = 0;
  std::string_view problem;
  while (off < seg.file_bytes) {
    Header h;
    if (off + kHeaderBytes > seg.file_bytes || !ReadAt(seg.fd, &h, kHeaderBytes, off)) {
      problem = "truncated record header";
      break;
    }
    if (IsEndMark(h)) break;
    problem = HeaderProblem(h, off, seg.file_bytes);
    if (problem.empty() && (h.identity_lo != identity_.lo || h.identity_hi != identity_.hi)) {
      if (off == 0) return SegmentScan::kOtherIdentity;
      problem = "a record of another model";
    }
    if (problem.empty() && h.seq <= seg.last_seq) problem = "a record older than the one before";
    if (problem.empty() && h.seq >= kMaxSeq) problem = "sequence out of range";
    if (!problem.empty()) break;
    records->push_back(Meta{nullptr, off, h.seq, h.payload_bytes});
    keys->push_back(BlockHash{h.key_lo, h.key_hi});
    if (seg.first_seq == 0) seg.first_seq = h.seq;
    seg.last_seq = h.seq;
    off += kHeaderBytes + static_cast<int64_t>(h.payload_bytes);
  }
  seg.end = off;
  if (records->empty()) return SegmentScan::kBad;
  if (!problem.empty()) {
    TLOG(WARN) << "disk KV tier: " << SegmentPath(seg.number).string() << ": " << problem
               << " at byte " << off << "; its " << seg.file_bytes - off
               << " bytes from there are not used";
  }
  return SegmentScan::kOurs;
}

Status DiskTier::Scan() {
  const std::string prefix = Hex16(identity_.hi) + "-";
  struct Found {
    std::shared_ptr<Segment> seg;
    std::vector<Meta> records;
    std::vector<BlockHash> keys;
  };
  std::vector<Found> found;
  int64_t old_format = 0;
  std::error_code ec;
  fs::directory_iterator it(dir_, ec);
  if (ec) return Unavailable("--kv-offload-dir " + dir_.string() + ": " + ec.message());
  for (const fs::directory_entry& e : it) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file(ec)) continue;
    const bool ours = name.compare(0, prefix.size(), prefix) == 0;
    if (EndsWith(name, kOldTmpExt) || name == kProbeName) {  // a write cut short
      fs::remove(e.path(), ec);
      ++removed_;
      continue;
    }
    if (EndsWith(name, kOldExt)) {  // format 1: this model's are never read again
      if (ours) {
        fs::remove(e.path(), ec);
        ++removed_;
        ++old_format;
      } else {
        ++ignored_;
      }
      continue;
    }
    if (!EndsWith(name, kExt)) continue;
    const std::string number = name.substr(prefix.size(), name.size() - prefix.size() - 4);
    if (!ours || number.size() != 8 ||
        number.find_first_not_of("0123456789abcdef") != std::string::npos) {
      ++ignored_;  // another model's (or not a segment's name): never used, left alone
      continue;
    }
    const int fd = ::open(e.path().c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      TLOG(WARN) << "disk KV tier: cannot open " << e.path().string();
      ++ignored_;
      continue;
    }
    Found f{std::make_shared<Segment>(fd), {}, {}};
    f.seg->number = static_cast<uint32_t>(std::stoul(number, nullptr, 16));
    next_number_ = std::max(next_number_, f.seg->number + 1);
    switch (ScanSegment(*f.seg, &f.records, &f.keys)) {
      case SegmentScan::kOtherIdentity:
        ++ignored_;  // under this model's name, another model's records: never used
        break;
      case SegmentScan::kBad:
        TLOG(WARN) << "disk KV tier: removing " << e.path().string() << ": no valid record";
        fs::remove(e.path(), ec);
        ++removed_;
        break;
      case SegmentScan::kOurs:
        found.push_back(std::move(f));
        break;
    }
  }
  if (old_format > 0) {
    TLOG(INFO) << "disk KV tier: removed " << old_format << " block files of format 1";
  }
  // Newest first, within the capacity (e.g. lowered since): the older segments go.
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.seg->last_seq > b.seg->last_seq; });
  size_t keep = 0;
  for (; keep < found.size(); ++keep) {
    if (file_bytes_ + found[keep].seg->file_bytes > capacity_) break;
    file_bytes_ += found[keep].seg->file_bytes;
  }
  for (size_t i = keep; i < found.size(); ++i) {
    fs::remove(SegmentPath(found[i].seg->number), ec);
    ++removed_;
  }
  found.resize(keep);
  for (auto f = found.rbegin(); f != found.rend(); ++f) {  // oldest first: newer records win
    for (size_t i = 0; i < f->records.size(); ++i) {
      Meta m = f->records[i];
      m.seg = f->seg;
      index_.insert_or_assign(f->keys[i], std::move(m));
    }
    f->seg->keys = std::move(f->keys);
    next_seq_ = std::max(next_seq_, f->seg->last_seq + 1);
    segments_.push_back(f->seg);
  }
  scanned_ = static_cast<int64_t>(index_.size());
  return OkStatus();
}

void DiskTier::Probe() {
  constexpr size_t kBytes = 1u << 20;
  const fs::path p = dir_ / kProbeName;
  std::vector<uint8_t> buf(kBytes, 7);
  {
    Fd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    iovec iov{buf.data(), kBytes};
    if (fd.get() < 0 || !TransferAll<true>(fd.get(), std::span<iovec>(&iov, 1), 0)) return;
  }
  const auto t = Clock::now();
  {
    Fd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() >= 0 && ReadAt(fd.get(), buf.data(), kBytes, 0)) {
      (void)Xxh3(buf.data(), kBytes);  // a load checks the checksum too
      probe_seconds_per_byte_ = std::chrono::duration<double>(Clock::now() - t).count() / kBytes;
    }
  }
  std::error_code ec;
  fs::remove(p, ec);
}

void DiskTier::Reclaim(Segment& seg) {
  for (const BlockHash& k : seg.keys) {
    auto it = index_.find(k);
    if (it != index_.end() && it->second.seg.get() == &seg) {
      index_.erase(it);
      ++stats_.evictions;
    }
  }
  seg.keys.clear();
  seg.first_seq = seg.last_seq = 0;
  seg.end = 0;
  ++seg.gen;
}

bool DiskTier::WantsLocked(const BlockHash& key) const {
  if (queued_.count(key)) return false;
  auto it = index_.find(key);
  if (it == index_.end()) return true;
  // Held: written again when its segment is in the older half of a full tier (the next to be
  // overwritten), so a block still in use is not lost with it.
  if (file_bytes_ + segment_bytes_ <= capacity_) return false;
  const Segment& middle = *segments_[segments_.size() / 2];
  return middle.first_seq != 0 && it->second.seq < middle.first_seq;
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
  Meta m;
  uint64_t gen = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::vector<uint8_t>* queued = nullptr;
    if (auto q = queued_.find(key); q != queued_.end()) queued = q->second;
    auto it = index_.find(key);
    const uint64_t held = queued               ? queued->size()
                          : it != index_.end() ? it->second.payload_bytes
                                               : 0;
    if (!queued && it == index_.end()) {
      ++stats_.load_failures;
      return NotFound("disk KV tier: block " + BlockHashHex(key) + " is not held");
    }
    if (held != want) {
      ++stats_.load_failures;
      return InvalidArgument("disk KV tier: block of " + std::to_string(held) +
                             " bytes loaded into " + std::to_string(want));
    }
    if (queued) {  // not written yet: from memory
      size_t off = 0;
      for (const auto& c : dst) {
        std::memcpy(c.data(), queued->data() + off, c.size());
        off += c.size();
      }
      ++stats_.hits;
      return OkStatus();
    }
    m = it->second;
    gen = m.seg->gen;
  }
  Header h;
  std::vector<iovec> iov;
  iov.reserve(dst.size() + 1);
  iov.push_back({&h, sizeof(h)});
  for (const auto& c : dst) iov.push_back({c.data(), c.size()});
  std::string_view bad;
  if (!TransferAll<false>(m.seg->fd, iov, m.offset)) bad = "short read";
  if (bad.empty()) bad = HeaderProblem(h, m.offset, m.offset + kHeaderBytes + int64_t(want));
  if (bad.empty() && (h.identity_lo != identity_.lo || h.identity_hi != identity_.hi ||
                      h.key_lo != key.lo || h.key_hi != key.hi || h.seq != m.seq)) {
    bad = "the header names another block or model";
  }
  if (bad.empty()) {
    Xxh3Stream st;
    for (const auto& c : dst) st.Update(c.data(), c.size());
    if (st.Digest() != h.payload_hash) bad = "payload checksum mismatch";
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (m.seg->gen != gen) {  // its segment was overwritten meanwhile
    ++stats_.load_failures;
    return NotFound("disk KV tier: block " + BlockHashHex(key) + " was evicted while loading");
  }
  if (!bad.empty()) {
    const std::string where = SegmentPath(m.seg->number).string() + " at byte " +
                              std::to_string(m.offset) + ": " + std::string(bad);
    TLOG(WARN) << "disk KV tier: dropping the block in " << where;
    auto it = index_.find(key);
    if (it != index_.end() && it->second.seg == m.seg && it->second.offset == m.offset) {
      index_.erase(it);
    }
    ++stats_.load_failures;
    return DataLoss("disk KV tier: " + where);
  }
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
    if (!WantsLocked(key)) return;
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
    if (!WantsLocked(key)) {
      declined_to = buffers_;
    } else if (n + 2 * kHeaderBytes > capacity_ || queued_bytes_ + n > queue_budget_) {
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

std::shared_ptr<DiskTier::Segment> DiskTier::SegmentFor(int64_t record) {
  if (!segments_.empty()) {
    const Segment& active = *segments_.back();
    if (!active.closed && (active.end == 0 || active.end + record <= segment_bytes_)) {
      return segments_.back();
    }
  }
  std::shared_ptr<Segment> seg;
  if (segments_.empty() ||
      file_bytes_ + std::max(segment_bytes_, record + kHeaderBytes) <= capacity_) {
    for (int tries = 0; tries < 16 && !seg; ++tries) {  // a new file, never over another's
      const uint32_t number = next_number_++;
      const int fd =
          ::open(SegmentPath(number).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) {
        seg = std::make_shared<Segment>(fd);
        seg->number = number;
      } else if (errno != EEXIST) {
        WarnWriteFailure(SegmentPath(number));
        break;
      }
    }
    if (!seg) return nullptr;
  } else {  // the oldest is overwritten from its start
    seg = segments_.front();
    segments_.pop_front();
    Reclaim(*seg);
    seg->closed = false;
  }
  segments_.push_back(seg);
  return seg;
}

bool DiskTier::Append(const BlockHash& key, const std::vector<uint8_t>& bytes) {
  const int64_t record = kHeaderBytes + static_cast<int64_t>(bytes.size());
  std::vector<fs::path> unlink;
  std::shared_ptr<Segment> seg;
  int64_t offset = 0;
  uint64_t seq = 0, gen = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seg = SegmentFor(record);
    if (seg) {
      // What the file grows by: the record and the end mark past its size.
      auto growth = [&] {
        return std::max<int64_t>(seg->end + record + kHeaderBytes - seg->file_bytes, 0);
      };
      while (file_bytes_ + growth() > capacity_ && segments_.size() > 1) {
        // Beyond the capacity (blocks of other sizes, a segment grown past its target): the
        // oldest other segments go.
        std::shared_ptr<Segment> old = segments_.front();
        segments_.pop_front();
        Reclaim(*old);
        file_bytes_ -= old->file_bytes;
        unlink.push_back(SegmentPath(old->number));
      }
      if (file_bytes_ + growth() > capacity_) Reclaim(*seg);  // the only one: from its start
      offset = seg->end;
      seg->end = offset + record;
      const int64_t file = std::max(seg->file_bytes, seg->end + kHeaderBytes);  // + the end mark
      file_bytes_ += file - seg->file_bytes;
      seg->file_bytes = file;
      seq = next_seq_++;
      gen = seg->gen;
    }
  }
  std::error_code ec;
  for (const fs::path& p : unlink) fs::remove(p, ec);
  if (!seg) return false;
  Header h{};
  std::memcpy(h.magic, kMagic, 4);
  h.version = kVersion;
  h.identity_lo = identity_.lo;
  h.identity_hi = identity_.hi;
  h.key_lo = key.lo;
  h.key_hi = key.hi;
  h.seq = seq;
  h.payload_bytes = bytes.size();
  h.payload_hash = Xxh3(bytes.data(), bytes.size());
  h.header_hash = HeaderHash(h);
  iovec iov[3] = {{&h, sizeof(h)},
                  {const_cast<uint8_t*>(bytes.data()), bytes.size()},
                  {const_cast<Header*>(&kEndMark), sizeof(kEndMark)}};
  const bool ok = TransferAll<true>(seg->fd, iov, offset);
  std::lock_guard<std::mutex> lock(mu_);
  if (!ok) {
    seg->closed = true;
    WarnWriteFailure(SegmentPath(seg->number));
    return false;
  }
  if (seg->gen != gen) return false;
  index_.insert_or_assign(key, Meta{seg, offset, seq, bytes.size()});
  seg->keys.push_back(key);
  if (seg->first_seq == 0) seg->first_seq = seq;
  seg->last_seq = seq;
  ++stats_.stores;
  return true;
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
  {
    std::lock_guard<std::mutex> w(write_mu_);
    (void)Append(p.key, p.bytes);
  }
  lock.lock();
  // Erased last, so Flush returns only once the block is on disk.
  queued_.erase(p.key);
  queued_bytes_ -= static_cast<int64_t>(p.bytes.size());
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

size_t DiskTier::segments() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segments_.size();
}

BlockStoreStats DiskTier::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BlockStoreStats s = stats_;
  s.blocks = static_cast<int64_t>(index_.size());
  for (const auto& [key, bytes] : queued_) s.blocks += index_.count(key) ? 0 : 1;
  s.bytes = file_bytes_ + queued_bytes_;
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
