// The decode replica's side of KV transfer (docs/pd.md).
//
// KvInbox: the blocks received from prefill replicas, in host memory under their prefix-cache
// keys, as a kv::BlockStore the engine loads from (engine/kv_offload.h): a request arriving
// after its KV finds every received block of its prompt through the store and computes only
// the rest. An entry leaves the inbox when it is loaded (it is then in the pool's prefix
// cache), when it is older than `ttl`, or when newer blocks need the room (`capacity_bytes`,
// oldest first). It takes no evictions from the pool (accepts_evictions false).
//
// PdReceiver: the KV listener (--kv-port). Each connection is one transfer, decoded on its own
// thread (at most max_connections at once; more are closed at once) with a deadline on every
// read: `idle_timeout` (the prefill computes between blocks) plus the pending frame's bytes at
// the stall bound's rate. A transfer whose header does not match this replica's shape is
// refused (Ack with the error code); every block that arrived whole and checksummed is kept,
// whatever happens after it (a reset, a stall, a corrupt frame, a dead prefill replica): those
// are valid prefix blocks, and the decode request recomputes the rest. The Ack reports the
// blocks kept. The blocks of all transfers whose layers are still arriving take at most the
// inbox's capacity (KvInbox::TakeBuffer); a transfer that needs more fails.
// Thread-safety: every method from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kv/block_store.h"
#include "kv/kv_transport.h"
#include "kv/kv_wire.h"
#include "server/pd_sender.h"

namespace tachyon::server {

class KvInbox final : public kv::BlockStore {
 public:
  // Blocks of any size are held (the receiver checked their shape against this replica's).
  KvInbox(int64_t capacity_bytes, std::chrono::milliseconds ttl);

  std::string_view name() const override { return "transfer"; }
  size_t Lookup(std::span<const kv::BlockHash> keys) override;
  Status Load(const kv::BlockHash& key, kv::BlockChunks dst) override;
  bool accepts_evictions() const override { return false; }
  void Store(const kv::BlockHash& key, kv::BlockChunks src) override;
  void StoreOwned(const kv::BlockHash& key, std::vector<uint8_t> bytes) override;
  double LoadSecondsPerBlock() const override;
  kv::BlockStoreStats Stats() const override;

  // A received block: its chunks back to back in payload from `offset` on (a decoded
  // kv::KvWireBlock::bytes, offset kKvWireBlockFixedBytes). False when it cannot be held
  // (larger than the capacity, or no bytes).
  bool Put(const kv::BlockHash& key, std::vector<uint8_t> payload, size_t offset);
  // A buffer of `bytes` bytes (contents unspecified) for a block being received: one a loaded
  // block left behind when there is one, so that steady traffic reuses memory that is already
  // mapped instead of faulting in fresh pages for every block. The spare buffers count against
  // capacity_bytes with the held blocks and are the first to go when a block needs the room.
  // The buffers of blocks being received count against capacity_bytes on their own, from
  // TakeBuffer to EndReceiving: an empty vector when another one would pass it (the transfer
  // then fails, and its decode request computes what did not arrive).
  std::vector<uint8_t> TakeBuffer(size_t bytes);
  // Ends the count of taken buffers of `bytes` bytes in all: blocks that arrived (and were
  // Put) or that were dropped unfinished.
  void EndReceiving(int64_t bytes);
  int64_t spare_bytes() const;      // held in spare buffers
  int64_t receiving_bytes() const;  // taken and not ended

 private:
  struct Entry {
    std::vector<uint8_t> payload;
    size_t offset = 0;  // where the chunks start in payload
    size_t bytes() const { return payload.size() - offset; }
    std::chrono::steady_clock::time_point arrived;
    std::list<kv::BlockHash>::iterator age;
  };
  void ExpireLocked(std::chrono::steady_clock::time_point now);
  void RecycleLocked(std::vector<uint8_t> buffer);  // kept as a spare if it fits
  void EraseLocked(std::unordered_map<kv::BlockHash, Entry, kv::BlockHashHasher>::iterator it);

  const int64_t capacity_;
  const std::chrono::milliseconds ttl_;
  mutable std::mutex mu_;
  std::unordered_map<kv::BlockHash, Entry, kv::BlockHashHasher> entries_;  // GUARDED_BY(mu_)
  std::list<kv::BlockHash> by_age_;  // GUARDED_BY(mu_) oldest first
  kv::BlockStoreStats stats_;        // GUARDED_BY(mu_)
  std::vector<std::vector<uint8_t>> spare_;  // GUARDED_BY(mu_) buffers of loaded blocks
  int64_t spare_bytes_ = 0;                  // GUARDED_BY(mu_) their capacities
  int64_t receiving_bytes_ = 0;              // GUARDED_BY(mu_)
  double load_ema_ = 0;              // GUARDED_BY(mu_)
  size_t last_block_bytes_ = 0;      // GUARDED_BY(mu_)
};

struct PdReceiverOptions {
  std::chrono::milliseconds idle_timeout{30000};
  kv::StallBound stall;
  size_t max_connections = 64;
};

class PdReceiver {
 public:
  PdReceiver(std::unique_ptr<kv::KvTransport> transport, kv::KvWireShape shape,
             std::shared_ptr<KvInbox> inbox, PdReceiverOptions options = {});
  ~PdReceiver();  // Stop()
  PdReceiver(const PdReceiver&) = delete;
  PdReceiver& operator=(const PdReceiver&) = delete;

  // Listens on HOST:PORT (port 0: any) and starts accepting. Errors: the transport's.
  Status Start(const std::string& address);
  std::string address() const;  // HOST:PORT bound; "" before Start
  // Closes the listener and every connection, joins the threads. Idempotent.
  void Stop();

  const PdTransferCounters& counters() const { return counters_; }

 private:
  struct Connection;
  void AcceptLoop();
  void Serve(Connection* c);
  void Reap();

  std::unique_ptr<kv::KvTransport> transport_;
  const kv::KvWireShape shape_;
  std::shared_ptr<KvInbox> inbox_;
  const PdReceiverOptions options_;
  PdTransferCounters counters_;
  std::unique_ptr<kv::KvListener> listener_;
  std::string address_;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> connections_;  // GUARDED_BY(mu_)
  bool stopped_ = false;                                  // GUARDED_BY(mu_)
};

}  // namespace tachyon::server
