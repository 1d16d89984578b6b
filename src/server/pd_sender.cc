#include "server/pd_sender.h"

#include <cstring>
#include <deque>
#include <utility>

#include "util/logging.h"

namespace tachyon::server {

using Clock = std::chrono::steady_clock;

class PdSender::Transfer final : public engine::KvExportSink {
 public:
  Transfer(PdSender* owner, KvTransferTarget target, uint32_t max_blocks,
           std::function<void(const PdTransferResult&)> on_done)
      : owner_(owner),
        target_(std::move(target)),
        max_blocks_(max_blocks),
        on_done_(std::move(on_done)) {}

  void StartThread() {
    thread_ = std::thread([this] { Run(); });
  }

  // Engine thread: copies the block unless the transfer already failed.
  void OnBlock(uint32_t index, const kv::BlockHash& hash,
               std::span<const std::span<uint8_t>> chunks) override {
    if (failed_.load(std::memory_order_relaxed)) return;
    Block b{index, hash, {}};
    b.bytes.resize(owner_->shape_.block_bytes());
    size_t at = 0;
    for (const auto& c : chunks) {
      if (at + c.size() > b.bytes.size()) {  // a shape the header does not describe
        failed_.store(true);
        break;
      }
      std::memcpy(b.bytes.data() + at, c.data(), c.size());
      at += c.size();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (first_block_ == Clock::time_point{}) first_block_ = Clock::now();
    queue_.push_back(std::move(b));
    cv_.notify_one();
  }

  void OnEnd(Status status) override {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    end_status_ = std::move(status);
    cv_.notify_one();
  }

  // Any thread: ends the transfer now (Stop).
  void Cancel() {
    failed_.store(true);
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      if (conn_) conn_->Close();
      cv_.notify_one();
    }
  }

  bool finished() const { return finished_.load(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Block {
    uint32_t index;
    kv::BlockHash hash;
    std::vector<uint8_t> bytes;
  };

  void Run() {
    PdTransferResult result;
    result.status = Transfer1(&result);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (first_block_ != Clock::time_point{}) {
        result.seconds = std::chrono::duration<double>(Clock::now() - first_block_).count();
      }
      if (conn_) conn_->Close();
    }
    failed_.store(true);  // no more copies
    PdTransferCounters& c = owner_->counters_;
    (result.status.ok() ? c.transfers_ok : c.transfers_failed).fetch_add(1);
    c.blocks.fetch_add(result.blocks_sent);
    c.bytes.fetch_add(static_cast<int64_t>(result.bytes_sent));
    c.micros.fetch_add(static_cast<int64_t>(result.seconds * 1e6));
    if (!result.status.ok()) {
      TLOG(WARN) << "KV transfer " << target_.transfer_id << " to " << target_.address
                 << " failed after " << result.blocks_sent
                 << " blocks (the decode replica recomputes the rest): "
                 << result.status.ToString();
    }
    on_done_(result);
    on_done_ = nullptr;
    finished_.store(true);
  }

  Status Transfer1(PdTransferResult* result) {
    const PdSenderOptions& o = owner_->options_;
    auto conn = owner_->transport_->Connect(target_.address, Clock::now() + o.connect_timeout);
    if (!conn.ok()) return conn.status();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return Cancelled("KV transfer stopped");
      conn_ = std::move(*conn);
    }
    auto header = kv::EncodeHeader({owner_->shape_, target_.transfer_id, max_blocks_});
    if (!header.ok()) return header.status();
    RETURN_IF_ERROR(conn_->Send(std::span(&*header, 1), o.stall.For(header->size())));
    for (;;) {
      std::deque<Block> batch;
      bool ended = false;
      Status end_status;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() || ended_ || cancelled_; });
        if (cancelled_) return Cancelled("KV transfer stopped");
        batch.swap(queue_);
        ended = ended_;
        end_status = end_status_;
      }
      if (failed_.load()) return Internal("KV transfer: a block of another shape");
      std::vector<kv::KvWireFrame> frames;
      std::vector<std::span<const uint8_t>> chunks(owner_->shape_.num_chunks);
      uint64_t bytes = 0;
      for (const Block& b : batch) {
        if (result->blocks_sent + frames.size() >= max_blocks_) break;  // more than announced
        for (uint32_t c = 0; c < chunks.size(); ++c) {
          chunks[c] = std::span<const uint8_t>(b.bytes).subspan(c * owner_->shape_.chunk_bytes,
                                                                owner_->shape_.chunk_bytes);
        }
        auto f = kv::EncodeBlock(owner_->shape_, b.index, 0, b.hash, chunks);
        if (!f.ok()) return f.status();
        bytes += f->size();
        frames.push_back(std::move(*f));
      }
      if (!frames.empty()) {
        RETURN_IF_ERROR(conn_->Send(frames, o.stall.For(bytes)));
        result->blocks_sent += static_cast<uint32_t>(frames.size());
        result->bytes_sent += bytes;
      }
      if (!ended) continue;
      const kv::KvWireEnd end{result->blocks_sent, end_status.ok() ? kv::KvWireEndStatus::kComplete
                                                                   : kv::KvWireEndStatus::kAborted};
      const kv::KvWireFrame end_frame = kv::EncodeEnd(end);
      RETURN_IF_ERROR(conn_->Send(std::span(&end_frame, 1), o.stall.For(end_frame.size())));
      std::vector<uint8_t> ack(kv::kKvWireAckFrameBytes);
      RETURN_IF_ERROR(conn_->ReceiveExactly(ack, o.stall.For(ack.size())));
      auto a = kv::DecodeAck(ack);
      if (!a.ok()) return a.status();
      result->blocks_acked = a->num_blocks;
      if (a->status != 0) {
        return Unavailable("KV transfer refused by the receiver (status " +
                           std::to_string(a->status) + ")");
      }
      if (!end_status.ok()) return end_status;
      return OkStatus();
    }
  }

  PdSender* owner_;
  const KvTransferTarget target_;
  const uint32_t max_blocks_;
  std::function<void(const PdTransferResult&)> on_done_;
  std::thread thread_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> finished_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Block> queue_;                 // GUARDED_BY(mu_)
  bool ended_ = false;                      // GUARDED_BY(mu_)
  bool cancelled_ = false;                  // GUARDED_BY(mu_)
  Status end_status_;                       // GUARDED_BY(mu_)
  Clock::time_point first_block_{};         // GUARDED_BY(mu_)
  std::unique_ptr<kv::KvConnection> conn_;  // GUARDED_BY(mu_) to set; Run() uses it
};

PdSender::PdSender(std::unique_ptr<kv::KvTransport> transport, kv::KvWireShape shape,
                   PdSenderOptions options)
    : transport_(std::move(transport)), shape_(shape), options_(options) {}

PdSender::~PdSender() {
  Stop();
}

namespace {

// A sink that drops everything (a transfer that could not start).
class NullSink final : public engine::KvExportSink {
 public:
  void OnBlock(uint32_t, const kv::BlockHash&, std::span<const std::span<uint8_t>>) override {}
  void OnEnd(Status) override {}
};

}  // namespace

std::shared_ptr<engine::KvExportSink> PdSender::Start(
    const KvTransferTarget& target, uint32_t max_blocks,
    std::function<void(const PdTransferResult&)> on_done) {
  Reap();
  std::shared_ptr<Transfer> t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_ && transfers_.size() < options_.max_transfers) {
      t = std::make_shared<Transfer>(this, target, max_blocks, std::move(on_done));
      transfers_.push_back(t);
      t->StartThread();
      return t;
    }
  }
  counters_.transfers_failed.fetch_add(1);
  PdTransferResult r;
  r.status = Unavailable("KV transfer not started: the sender is stopped or at its limit of " +
                         std::to_string(options_.max_transfers) + " transfers");
  on_done(r);
  return std::make_shared<NullSink>();
}

void PdSender::Reap() {
  std::vector<std::shared_ptr<Transfer>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = transfers_.begin(); it != transfers_.end();) {
      if ((*it)->finished()) {
        done.push_back(std::move(*it));
        it = transfers_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& t : done) t->Join();
}

void PdSender::Stop() {
  std::vector<std::shared_ptr<Transfer>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    all.swap(transfers_);
  }
  for (auto& t : all) t->Cancel();
  for (auto& t : all) t->Join();
}

void FinalOutputGate::Open() {
  std::function<void()> run;
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    run = std::move(pending_);
    pending_ = nullptr;
  }
  if (run) run();
}

void FinalOutputGate::Deliver(std::function<void()> deliver) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_) {
      pending_ = std::move(deliver);
      return;
    }
  }
  deliver();
}

}  // namespace tachyon::server
