// KvEventPublisher: `GET /v1/kv_events` and `GET /v1/replica_info` of `tachyon serve`, the
// stream a router (router/kv_event_stream.h) subscribes to, to know which prefix blocks this
// replica holds and how loaded it is. docs/router.md describes the wire form:
//
//   an SSE stream (`data: <json>` events), first a snapshot, in parts of at most
//   `snapshot_part_blocks` hashes, one part per poll (so that a large cache never overflows the
//   connection's stream buffer):
//     {"type":"snapshot","seq":S,"block_size":16,"blocks":["<hash hex>",...],"complete":B,
//      "labels":{...},"load":{...}}
//     {"type":"snapshot_part","blocks":[...],"complete":B}   (until complete is true)
//   then, as the prefix cache changes, batches of events numbered S+1, S+2, ...:
//     {"type":"events","seq":FIRST,"time":T,"events":[["stored","<hex>"],["removed","<hex>"]]}
//     (event i has seq FIRST + i; T: Unix time in seconds of the first)
//   and every `load_interval` (also a heartbeat):
//     {"type":"load","time":T,"running":R,"waiting":W,"kv_usage":U,"kv_blocks":N}
//   A subscriber that falls behind the log's window gets a new snapshot; when the replica
//   drains, {"type":"draining"} and the end of the stream.
//
// One thread polls the log every `poll_interval` while anyone subscribes (with no subscriber it
// sleeps until one comes) and writes to every subscriber; a write never
// blocks (ResponseChannel's bounded buffer drops a subscriber that reads too slowly; it
// reconnects and gets a snapshot). Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/kv_events.h"
#include "server/backend.h"
#include "server/http.h"

namespace tachyon::server {

struct KvEventsOptions {
  int block_size = 16;
  nlohmann::json labels = nlohmann::json::object();  // --label k=v, string values
  std::chrono::milliseconds poll_interval{20};
  std::chrono::milliseconds load_interval{250};
  size_t max_events_per_message = 4096;
  size_t snapshot_part_blocks = 8192;
  size_t max_subscribers = 64;  // more get 503
};

class KvEventPublisher {
 public:
  // `log` (never null) and `backend` (its Metrics() give the load) must outlive the publisher.
  // Starts the polling thread.
  KvEventPublisher(std::shared_ptr<kv::KvEventLog> log, const GenerationBackend* backend,
                   KvEventsOptions options);
  ~KvEventPublisher();
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // The handler of GET /v1/kv_events: starts the stream on `channel` (or answers 503 when
  // stopped or at max_subscribers). Call on the channel's executor.
  void Subscribe(const std::shared_ptr<ResponseChannel>& channel);
  // The body of GET /v1/replica_info: labels, block_size, kv_events, load.
  nlohmann::json Info() const;

  // Tells every subscriber the replica drains ({"type":"draining"}) and ends their streams;
  // later subscriptions get 503. Idempotent.
  void Drain();
  // Drain(), then stops the thread. Idempotent.
  void Stop();

  size_t subscribers() const;
  // Passes of the polling thread so far (for tests: it makes none while no one subscribes).
  uint64_t polls() const;

 private:
  struct Subscriber {
    std::shared_ptr<ResponseChannel> channel;
    std::shared_ptr<std::atomic<bool>> closed;
    uint64_t seq = 0;  // the last event sent (or the snapshot's seq)
    bool snapshot_started = false;
    std::vector<kv::BlockHash> snapshot;  // the snapshot's hashes not sent yet
    size_t snapshot_next = 0;
  };
  void Loop();
  nlohmann::json Load() const;
  // Writes what `s` has not seen yet. False when the subscriber is gone.
  bool Feed(Subscriber& s);

  const std::shared_ptr<kv::KvEventLog> log_;
  const GenerationBackend* backend_;
  const KvEventsOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Subscriber> subscribers_;  // GUARDED_BY(mu_)
  bool draining_ = false;                // GUARDED_BY(mu_)
  bool stop_ = false;                    // GUARDED_BY(mu_)
  uint64_t polls_ = 0;                   // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace tachyon::server
