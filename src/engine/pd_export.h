// KV export: the engine's side of prefill/decode disaggregation (docs/pd.md). A request that
// carries a KvExportSink (EngineRequest::kv_export) hands its prompt's full KV blocks to the
// sink as they are computed, layer by layer: a block that an engine step completes goes out
// layer l by layer l while that step's forward pass runs (ModelExecutor::SetLayerKvHook: as
// soon as layer l's K/V is stored, before the later layers are computed), so the transfer of a
// prefill chunk overlaps the chunk's own compute. Blocks computed before the step (found in the
// prefix cache) go out whole, before the step runs. The sink (server/pd_sender.h) queues what
// it gets and sends it to a decode replica on its own thread, straight from the pool.
//
// Each (block, group, slot) is handed once: blocks in order (index 0, 1, ...) within a layer,
// the model's layers of one step in order 0, 1, ...; a block's hash is its prefix-cache key (the
// chained hash of the request's tokens rooted at its cache salt; with layer groups, group g's
// key of it, kv::GroupBlockHash). With layer groups (kv/kv_groups.h) each group's page of a
// block goes out under its group and key, a model layer's K/V as slot BlockBytes::PlaceOf(l) of
// its group's page; a sliding group's page already released (outside the window when the block
// was found cached) is not sent: the receiver needs only the window before the prompt's end.
// With each layer come its chunks' wire checksums (kv::KvWireChunkDigest): computed when the
// layer was stored (in cache, on the engine thread), and kept with the page while it stays
// allocated (kv::BlockPool::allocations), so a block found cached later comes with them too when
// an export computed it; a page another request computed comes without (the sink computes
// them). The sender then reads the pool once, in the kernel's copy. The chunks (kv/block_store.h: layer l's chunks
// of BlockBytes::Chunks, the cache's own dtype) point into the pool, and stay valid and
// unchanged after the call: the engine pins every block it hands (KvCacheManager::Pin) from
// the first hand-out until the export ended (OnEnd) and the sink's ReadsPool() says false, so
// the block is neither rewritten nor reused meanwhile, even after its request ended. OnEnd
// comes exactly once, when the request finishes for any reason (done, aborted, failed), with an
// error Status when blocks could not be exported (no KV bytes) or the request
// failed; the receiver then recomputes what it lacks (a block with some layers handed is
// incomplete). Only choice 0 exports.
// Thread-safety: OnLayer and OnEnd come from the engine thread and must be cheap and never
// block; ReadsPool may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_store.h"
#include "kv/kv_cache_manager.h"
#include "util/status.h"

namespace tachyon::engine {

struct Request;
struct SchedulerOutput;

class KvExportSink {
 public:
  virtual ~KvExportSink() = default;
  // Slot `slot` (a layer of the page) of group `group`'s page of block `index`: its chunks, in
  // the pool, and their kv::KvWireChunkDigest values (one per chunk) or none (empty).
  virtual void OnLayer(uint32_t index, uint32_t group, const kv::BlockHash& hash, uint32_t slot,
                       std::span<const std::span<uint8_t>> chunks,
                       std::span<const uint64_t> digests) = 0;
  virtual void OnEnd(Status status) = 0;
  // Whether it may still read chunks it was handed (a send from the pool in progress or
  // queued). Once false after OnEnd, it never reads them again. Default: it copies in OnLayer.
  virtual bool ReadsPool() const { return false; }
};

// The engine's KV exports: this step's hand-outs and the pins of every export. Engine thread.
class KvExporter {
 public:
  // After Schedule, before Execute: hands each scheduled exporting request's full blocks
  // computed before this step whole (every layer), and notes the blocks this step completes.
  // Pins every block handed or noted.
  void Plan(const SchedulerOutput& out, kv::KvCacheManager* kv, kv::BlockBytes* bytes);
  bool empty() const { return noted_.empty(); }
  // The executor's layer hook: hands model layer `layer` of every noted page of its group. A
  // layer out of order (or beyond BlockBytes::num_model_layers) is ignored; Finish hands it.
  void OnLayerStored(int64_t layer);
  // After a successful step: hands the layers the hook did not (every layer without a hook)
  // and marks the noted blocks exported. After a failed step: drops the notes (the requests
  // fail, and their exports end with an error).
  void Finish(bool step_ok);

  // Ends `r`'s export (OnEnd once; no-op without a sink or after the end); its pins stay until
  // the sink no longer reads the pool.
  void End(Request* r, Status status);
  // Unpins the blocks of ended exports whose sinks no longer read the pool.
  void ReleaseDone(kv::KvCacheManager* kv);
  // Blocks pinned by ended exports still read.
  bool holding() const { return !held_.empty(); }

 private:
  struct Noted {
    Request* r;
    uint32_t index;
    int group;
    int32_t block;  // the group's page
  };
  struct Held {
    std::shared_ptr<KvExportSink> sink;
    std::vector<int32_t> pins;
  };
  // Hands one layer of a page; `stored`: its K/V were just stored (the checksums are computed
  // and kept), else a cached page's kept checksums go with it if still valid.
  void HandLayer(const Noted& n, int64_t layer, bool stored);
  // The checksums kept for a page: valid while the pool has not handed the page out again.
  struct PageDigests {
    uint32_t allocation = 0;
    kv::BlockHash key;
    std::vector<uint64_t> digests;  // [num_chunks]
    std::vector<bool> have;         // [num_chunks]
  };

  kv::KvCacheManager* kv_ = nullptr;
  kv::BlockBytes* bytes_ = nullptr;
  std::vector<PageDigests> digests_;  // [pool blocks], sized on first use
  std::vector<Noted> noted_;
  int64_t next_layer_ = 0;
  std::vector<Held> held_;
};

}  // namespace tachyon::engine
