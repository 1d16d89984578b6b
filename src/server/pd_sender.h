// PdSender: the prefill replica's side of KV transfer (docs/pd.md). For each request run as a
// prefill for a decode replica it opens one connection (kv/kv_transport.h) to that replica's
// KV listener and streams the prompt's blocks in the wire format (kv/kv_wire.h) while the
// engine computes: the engine thread hands each block's layers to the transfer as the forward
// pass stores them (engine/pd_export.h), which queues each layer's K and V chunks as spans into
// the pool (no copy: the engine pins the blocks until ReadsPool() turns false, after the
// transfer ended); the transfer's own thread sends each as a Layer frame as soon as it is
// queued (sendmsg straight from the pool; the frame's checksum from the chunks' checksums the
// engine computed when it stored them, or, for chunks handed without, computed here), then the
// End frame (counting the blocks of which every layer went out), and waits for the Ack.
//
// Bounds: connecting gets `connect_timeout`; the frames go out in sends of about 256 KiB, each
// send and the Ack with the StallBound deadline of its size (a slow link that keeps moving is
// not a stall, however much is queued). Any failure (refused, reset, stall, a refusing Ack) ends
// the transfer: its connection closes, later blocks are dropped without a copy, and the
// decode replica recomputes what it did not receive. `on_done` runs exactly once per transfer
// with the result, on the transfer's thread (or in Start's caller when it cannot start).
// Thread-safety: Start / Stop / stats from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/pd_export.h"
#include "kv/kv_transport.h"
#include "kv/kv_wire.h"
#include "server/backend.h"

namespace tachyon::server {

// Wraps a request's output callback so that its final output (finished) is delivered only once
// `gate` opens (the transfer ended); earlier outputs pass through. `held_micros` (may be null):
// where the time a final output waited for Open() is added (microseconds). Thread-safe.
class FinalOutputGate {
 public:
  explicit FinalOutputGate(std::atomic<int64_t>* held_micros = nullptr)
      : held_micros_(held_micros) {}
  void Open();
  // Runs `deliver` now if open, else when Open() is called.
  void Deliver(std::function<void()> deliver);

 private:
  std::atomic<int64_t>* const held_micros_;
  std::mutex mu_;
  bool open_ = false;                                 // GUARDED_BY(mu_)
  std::function<void()> pending_;                     // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point held_since_;  // GUARDED_BY(mu_): when pending_ was set
};

struct PdSenderOptions {
  std::chrono::milliseconds connect_timeout{2000};
  kv::StallBound stall;       // per frame / Ack
  size_t max_transfers = 64;  // at once; more are refused (the decode replica recomputes)
};

struct PdTransferResult {
  Status status;             // ok: the receiver acknowledged every block
  uint32_t blocks_sent = 0;  // block frames written
  uint32_t blocks_acked = 0;
  uint64_t bytes_sent = 0;
  double seconds = 0;  // from the first block queued to the Ack (or the failure)
};

// Counters for /metrics (cumulative).
struct PdTransferCounters {
  std::atomic<int64_t> transfers_ok{0};
  std::atomic<int64_t> transfers_failed{0};
  std::atomic<int64_t> blocks{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> micros{0};  // transfer time, summed
  // Time the prefill answers waited for their transfer's end after the engine finished them
  // (the transfer's tail after the last forward pass: the last layers' frames, End, Ack).
  std::atomic<int64_t> tail_micros{0};
};

class PdSender {
 public:
  PdSender(std::unique_ptr<kv::KvTransport> transport, kv::KvWireShape shape,
           PdSenderOptions options = {});
  ~PdSender();  // Stop()
  PdSender(const PdSender&) = delete;
  PdSender& operator=(const PdSender&) = delete;

  // A transfer of at most `max_blocks` blocks (with layer groups, each group's page of them) to
  // `target`: the sink to set as the request's
  // EngineRequest::kv_export. `on_done` runs once when it ends. After Stop(), or beyond
  // max_transfers, the sink drops every block and on_done reports Unavailable.
  std::shared_ptr<engine::KvExportSink> Start(const KvTransferTarget& target, uint32_t max_blocks,
                                              std::function<void(const PdTransferResult&)> on_done);
  // The gate for the answer of a request whose transfer Start() began (open it from on_done):
  // the time it holds the final output adds to counters().tail_micros.
  std::shared_ptr<FinalOutputGate> AnswerGate() {
    return std::make_shared<FinalOutputGate>(&counters_.tail_micros);
  }
  // Closes every transfer's connection and joins their threads. Idempotent.
  void Stop();

  const PdTransferCounters& counters() const { return counters_; }
  const kv::KvWireShape& shape() const { return shape_; }

 private:
  class Transfer;
  void Reap();  // joins transfers that ended

  std::unique_ptr<kv::KvTransport> transport_;
  const kv::KvWireShape shape_;
  const PdSenderOptions options_;
  PdTransferCounters counters_;
  std::mutex mu_;
  std::vector<std::shared_ptr<Transfer>> transfers_;  // GUARDED_BY(mu_)
  bool stopped_ = false;                              // GUARDED_BY(mu_)
};

}  // namespace tachyon::server
