#include "server/pd_receiver.h"

#include <array>
#include <cstring>
#include <utility>

#include "util/logging.h"

namespace tachyon::server {

using Clock = std::chrono::steady_clock;

KvInbox::KvInbox(int64_t capacity_bytes, std::chrono::milliseconds ttl)
    : capacity_(capacity_bytes), ttl_(ttl) {
  stats_.capacity_bytes = capacity_bytes;
}

void KvInbox::EraseLocked(
    std::unordered_map<kv::BlockHash, Entry, kv::BlockHashHasher>::iterator it) {
  stats_.bytes -= static_cast<int64_t>(it->second.bytes());
  --stats_.blocks;
  by_age_.erase(it->second.age);
  entries_.erase(it);
}

void KvInbox::ExpireLocked(Clock::time_point now) {
  while (!by_age_.empty()) {
    auto it = entries_.find(by_age_.front());
    if (now - it->second.arrived < ttl_) break;
    ++stats_.evictions;
    EraseLocked(it);
  }
}

std::vector<uint8_t> KvInbox::TakeBuffer(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (receiving_bytes_ + static_cast<int64_t>(bytes) > capacity_) return {};
    receiving_bytes_ += static_cast<int64_t>(bytes);
    if (!spare_.empty()) {
      std::vector<uint8_t> v = std::move(spare_.back());
      spare_.pop_back();
      spare_bytes_ -= static_cast<int64_t>(v.capacity());
      v.resize(bytes);  // no work when it is a block of the same size, as it is in practice
      return v;
    }
  }
  return std::vector<uint8_t>(bytes);
}

void KvInbox::EndReceiving(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  receiving_bytes_ -= bytes;
}

int64_t KvInbox::spare_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spare_bytes_;
}

int64_t KvInbox::receiving_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return receiving_bytes_;
}

void KvInbox::RecycleLocked(std::vector<uint8_t> buffer) {
  const auto size = static_cast<int64_t>(buffer.capacity());
  if (size > 0 && stats_.bytes + spare_bytes_ + size <= capacity_) {
    spare_bytes_ += size;
    spare_.push_back(std::move(buffer));
  }
}

bool KvInbox::Put(const kv::BlockHash& key, std::vector<uint8_t> payload, size_t offset) {
  if (payload.size() <= offset) return false;
  const int64_t size = static_cast<int64_t>(payload.size() - offset);
  if (size > capacity_) return false;
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked(now);
  if (auto it = entries_.find(key); it != entries_.end()) EraseLocked(it);  // the newer copy
  while (stats_.bytes + spare_bytes_ + size > capacity_ && !spare_.empty()) {
    spare_bytes_ -= static_cast<int64_t>(spare_.back().capacity());
    spare_.pop_back();
  }
  while (stats_.bytes + size > capacity_ && !by_age_.empty()) {
    ++stats_.evictions;
    EraseLocked(entries_.find(by_age_.front()));
  }
  by_age_.push_back(key);
  entries_[key] = Entry{std::move(payload), offset, now, std::prev(by_age_.end())};
  stats_.bytes += size;
  ++stats_.blocks;
  ++stats_.stores;
  last_block_bytes_ = static_cast<size_t>(size);
  return true;
}

size_t KvInbox::Lookup(std::span<const kv::BlockHash> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked(Clock::now());
  size_t n = 0;
  while (n < keys.size() && entries_.count(keys[n])) ++n;
  if (n < keys.size() && n > 0) ++stats_.misses;
  return n;
}

Status KvInbox::Load(const kv::BlockHash& key, kv::BlockChunks dst) {
  const auto t0 = Clock::now();
  size_t total = 0;
  for (const auto& c : dst) total += c.size();
  Entry e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      ++stats_.load_failures;
      return NotFound("KV inbox: block no longer held");
    }
    if (it->second.bytes() != total) {
      ++stats_.load_failures;
      return InvalidArgument("KV inbox: a destination of " + std::to_string(total) +
                             " bytes for a block of " + std::to_string(it->second.bytes()));
    }
    // Loaded: the pool's prefix cache holds it from now on.
    e = std::move(it->second);
    by_age_.erase(e.age);
    entries_.erase(it);
    stats_.bytes -= static_cast<int64_t>(total);
    --stats_.blocks;
  }
  size_t at = e.offset;
  for (const auto& c : dst) {
    std::memcpy(c.data(), e.payload.data() + at, c.size());
    at += c.size();
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  RecycleLocked(std::move(e.payload));
  ++stats_.hits;
  stats_.load_seconds += s;
  load_ema_ = load_ema_ == 0 ? s : 0.9 * load_ema_ + 0.1 * s;
  return OkStatus();
}

void KvInbox::Store(const kv::BlockHash&, kv::BlockChunks) {}  // takes no evictions

void KvInbox::StoreOwned(const kv::BlockHash& key, std::vector<uint8_t> bytes) {
  Put(key, std::move(bytes), 0);
}

double KvInbox::LoadSecondsPerBlock() const {
  std::lock_guard<std::mutex> lock(mu_);
  // Before any load: a memcpy of the block at a conservative 1 GB/s.
  return load_ema_ > 0 ? load_ema_ : static_cast<double>(last_block_bytes_) / 1e9;
}

kv::BlockStoreStats KvInbox::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

constexpr size_t kMaxSpans = 128;  // places per scatter read

struct PdReceiver::Connection {
  std::unique_ptr<kv::KvConnection> conn;
  std::thread thread;
  std::atomic<bool> done{false};
};

PdReceiver::PdReceiver(std::unique_ptr<kv::KvTransport> transport, kv::KvWireShape shape,
                       std::shared_ptr<KvInbox> inbox, PdReceiverOptions options)
    : transport_(std::move(transport)),
      shape_(shape),
      inbox_(std::move(inbox)),
      options_(options) {}

PdReceiver::~PdReceiver() {
  Stop();
}

Status PdReceiver::Start(const std::string& address) {
  auto l = transport_->Listen(address);
  if (!l.ok()) return l.status();
  listener_ = std::move(*l);
  address_ = listener_->address();
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return OkStatus();
}

std::string PdReceiver::address() const {
  return address_;
}

void PdReceiver::AcceptLoop() {
  for (;;) {
    auto c = listener_->Accept(Clock::now() + std::chrono::seconds(3600));
    if (!c.ok()) {
      if (c.status().code() == StatusCode::kDeadlineExceeded) continue;
      if (c.status().code() == StatusCode::kCancelled) return;
      TLOG(WARN) << "KV listener: " << c.status().ToString();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    Reap();
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    if (connections_.size() >= options_.max_connections) {
      counters_.transfers_failed.fetch_add(1);
      (*c)->Close();  // the sender fails; its decode request recomputes
      continue;
    }
    auto conn = std::make_unique<Connection>();
    conn->conn = std::move(*c);
    Connection* raw = conn.get();
    conn->thread = std::thread([this, raw] { Serve(raw); });
    connections_.push_back(std::move(conn));
  }
}

void PdReceiver::Serve(Connection* c) {
  const auto t0 = Clock::now();
  kv::KvWireLimits limits;
  limits.max_block_bytes = std::max<uint64_t>(shape_.block_bytes(), 1);
  int64_t receiving = 0;  // what this transfer's taken buffers count in the inbox
  kv::KvWireDecoder d(limits);
  d.set_block_buffers([this, &receiving](size_t bytes) {
    std::vector<uint8_t> buffer = inbox_->TakeBuffer(bytes);
    receiving += static_cast<int64_t>(buffer.size());
    return buffer;
  });
  Status status;
  uint32_t kept = 0;
  uint64_t bytes = 0;
  bool checked = false;
  Status compatible;  // of the sender's shape with this replica's, once the header arrived
  // Each read goes where the decoder says: a frame's head and block list into its own buffers,
  // a layer frame's chunks straight into the blocks' buffers with one scatter read (no copy).
  // Reads never pass the current frame, so one connection's reads never take another
  // transfer's bytes.
  std::array<std::span<uint8_t>, kMaxSpans> spans;
  while (status.ok() && !d.done()) {
    const size_t k = d.NextBuffers(spans);
    uint64_t want = 0;
    for (size_t i = 0; i < k; ++i) want += spans[i].size();
    auto n = c->conn->ReceiveScatter(
        std::span(spans).first(k),
        options_.stall.For(want, Clock::now() + options_.idle_timeout));
    if (!n.ok()) {
      status = n.status();
      break;
    }
    if (*n == 0) {
      status = d.Finish();  // truncated
      break;
    }
    bytes += *n;
    const Status fed = d.Commit(*n);
    if (d.has_header() && !checked) {
      checked = true;
      compatible = kv::CheckCompatible(d.header().shape, shape_);
    }
    status = compatible.ok() ? fed : compatible;
    if (!compatible.ok()) break;
    // Blocks that arrived whole before an error later in the same read are valid: kept.
    for (kv::KvWireBlock& b : d.TakeBlocks()) {
      const auto size = static_cast<int64_t>(b.bytes.size());
      inbox_->EndReceiving(size);
      receiving -= size;
      if (inbox_->Put(b.hash, std::move(b.bytes), kv::kKvWireBlockFixedBytes)) ++kept;
    }
  }
  inbox_->EndReceiving(receiving);  // the blocks left unfinished
  const bool answer =
      d.done() || (!status.ok() && (status.code() == StatusCode::kInvalidArgument ||
                                    status.code() == StatusCode::kResourceExhausted));
  const uint32_t code = status.ok() ? 0 : static_cast<uint32_t>(status.code());
  if (status.ok() && d.end().status != kv::KvWireEndStatus::kComplete) {
    status = Cancelled("the sender aborted the transfer");
  }
  // Counted before the Ack: once the sender has it, the blocks are here and counted.
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  (status.ok() ? counters_.transfers_ok : counters_.transfers_failed).fetch_add(1);
  counters_.blocks.fetch_add(kept);
  counters_.bytes.fetch_add(static_cast<int64_t>(bytes));
  counters_.micros.fetch_add(static_cast<int64_t>(s * 1e6));
  if (!status.ok()) {
    TLOG(WARN) << "KV transfer from " << c->conn->peer() << " ended after " << kept
               << " blocks: " << status.ToString();
  }
  if (answer) {
    // What was kept (and why a transfer was refused); the sender may be gone already.
    const kv::KvWireFrame ack = kv::EncodeAck({kept, code});
    (void)c->conn->Send(std::span(&ack, 1), options_.stall.For(ack.size()));
  }
  c->conn->Close();
  c->done.store(true);
}

void PdReceiver::Reap() {
  std::vector<std::unique_ptr<Connection>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if ((*it)->done.load()) {
        done.push_back(std::move(*it));
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : done) c->thread.join();
}

void PdReceiver::Stop() {
  std::vector<std::unique_ptr<Connection>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    all.swap(connections_);
  }
  if (listener_) listener_->Close();
  if (acceptor_.joinable()) acceptor_.join();
  for (auto& c : all) c->conn->Close();
  for (auto& c : all) c->thread.join();
}

}  // namespace tachyon::server
