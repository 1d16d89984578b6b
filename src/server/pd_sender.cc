#include "server/pd_sender.h"

#include <algorithm>
#include <array>
#include <deque>
#include <utility>

#include "util/logging.h"

namespace tachyon::server {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kSendPiece = 512 << 10;   // bytes per layer frame (one Send call)
constexpr uint64_t kStallPiece = 256 << 10;  // bytes per stall floor (StallBound)

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

  // Engine thread: queues the layer's chunks (spans into the pool, pinned by the engine while
  // ReadsPool()) unless the transfer already failed.
  void OnLayer(uint32_t index, uint32_t group, const kv::BlockHash& hash, uint32_t layer,
               std::span<const std::span<uint8_t>> chunks,
               std::span<const uint64_t> digests) override {
    if (failed_.load(std::memory_order_relaxed)) return;
    const kv::KvWireShape& shape = owner_->shape_;
    if (layer >= shape.layers_per_block || group >= shape.n_groups() || chunks.size() != 2 ||
        chunks[0].size() != shape.chunk_bytes || chunks[1].size() != shape.chunk_bytes ||
        (!digests.empty() && digests.size() != 2)) {
      failed_.store(true);  // a shape the header does not describe
      return;
    }
    Layer l{index, group, layer, hash, chunks[0], chunks[1], {}, !digests.empty()};
    if (l.has_digests) l.digests = {digests[0], digests[1]};
    std::lock_guard<std::mutex> lock(mu_);
    if (first_block_ == Clock::time_point{}) first_block_ = Clock::now();
    queue_.push_back(std::move(l));
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

  bool ReadsPool() const override { return reading_.load(); }

  bool finished() const { return finished_.load(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Layer {
    uint32_t index;
    uint32_t group;  // the page's layer group
    uint32_t layer;  // its slot in the block's page
    kv::BlockHash hash;
    std::span<const uint8_t> k, v;  // in the pool
    std::array<uint64_t, 2> digests;  // their kv::KvWireChunkDigest, when has_digests
    bool has_digests;
  };

  void Run() {
    PdTransferResult result;
    result.status = Transfer1(&result);
    reading_.store(false);  // no span handed to it is read from here on
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
    // The header counts pages: one per layer group of each block.
    const uint32_t groups = std::max<uint32_t>(1, owner_->shape_.n_groups());
    auto header = kv::EncodeHeader({owner_->shape_, target_.transfer_id, max_blocks_ * groups});
    if (!header.ok()) return header.status();
    RETURN_IF_ERROR(conn_->Send(std::span(&*header, 1), o.stall.For(header->size())));
    // Per (group, block index): a page of each group per block.
    std::vector<uint32_t> layers_sent(size_t{max_blocks_} * groups, 0);
    for (;;) {
      std::deque<Layer> batch;
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
      // Consecutive layers of one layer group go out as one layer frame (a step's blocks come
      // layer by layer, cached blocks block by block) of at most about kSendPiece bytes; each
      // frame is checksummed and sent with the stall bound of its own size (a slow link that
      // keeps moving is not a stall, however much is queued), and the next is encoded while the
      // kernel moves the last.
      const kv::KvWireShape& shape = owner_->shape_;
      const uint64_t per_layer = kv::kKvWireRunEntryBytes + 2 * shape.chunk_bytes;
      const size_t max_run = std::max<uint64_t>(1, kSendPiece / per_layer);
      std::vector<kv::KvWireLayerRef> run;
      uint32_t run_group = 0;
      uint32_t completed = 0;
      auto send_run = [&]() -> Status {
        if (run.empty()) return OkStatus();
        auto f = kv::EncodeLayers(shape, run_group, run);
        if (!f.ok()) return f.status();
        // The stall bound of the frame sent as pieces of kStallPiece, each with its own floor:
        // a link that moves kStallPiece a floor (128 KiB/s) is slow, not stalled.
        const uint64_t pieces = (f->size() + kStallPiece - 1) / kStallPiece;
        const auto deadline =
            o.stall.For(f->size()) +
            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                static_cast<double>(pieces - 1) * o.stall.floor_seconds));
        RETURN_IF_ERROR(conn_->Send(std::span(&*f, 1), deadline));
        result->bytes_sent += f->size();
        run.clear();
        return OkStatus();
      };
      for (const Layer& l : batch) {
        if (l.index >= max_blocks_) continue;  // more than announced
        if (!run.empty() && (l.group != run_group || run.size() == max_run)) {
          RETURN_IF_ERROR(send_run());
        }
        run_group = l.group;
        run.push_back({l.index, l.layer, l.hash, l.k, l.v, l.digests, l.has_digests});
        if (++layers_sent[size_t{l.group} * max_blocks_ + l.index] == shape.layers_per_block) {
          ++completed;
        }
      }
      RETURN_IF_ERROR(send_run());
      result->blocks_sent += completed;
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
  std::atomic<bool> reading_{true};  // the thread may still read queued pool spans
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Layer> queue_;                 // GUARDED_BY(mu_)
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
  void OnLayer(uint32_t, uint32_t, const kv::BlockHash&, uint32_t,
               std::span<const std::span<uint8_t>>, std::span<const uint64_t>) override {}
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
    if (run && held_micros_ != nullptr) {
      held_micros_->fetch_add(std::chrono::duration_cast<std::chrono::microseconds>(
                                  std::chrono::steady_clock::now() - held_since_)
                                  .count());
    }
  }
  if (run) run();
}

void FinalOutputGate::Deliver(std::function<void()> deliver) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_) {
      pending_ = std::move(deliver);
      held_since_ = std::chrono::steady_clock::now();
      return;
    }
  }
  deliver();
}

}  // namespace tachyon::server
