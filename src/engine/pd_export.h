// KV export: the engine's side of prefill/decode disaggregation (docs/pd.md). A request that
// carries a KvExportSink (EngineRequest::kv_export) hands its prompt's full KV blocks to the
// sink as they are computed, step by step (chunked prefill: the first blocks go out while later
// chunks compute), including blocks it found in the prefix cache. The sink (server/pd_sender.h)
// copies each block and sends it to a decode replica on its own thread.
//
// Each block is handed once, in order (index 0, 1, ...), under its prefix-cache key (the chained
// hash of the request's tokens rooted at its cache salt), with its chunks (kv/block_store.h:
// BlockBytes::Chunks, the cache's own dtype) readable only during the call. OnEnd comes exactly
// once, when the request finishes for any reason (done, aborted, failed), with an error Status
// when blocks could not be exported (no KV bytes, layer groups); blocks not handed over are
// then recomputed by the receiver. Only choice 0 of a request exports.
// Thread-safety: both calls come from the engine thread; they must be cheap and never block.
#pragma once

#include <cstdint>
#include <span>

#include "kv/block_hash.h"
#include "kv/block_store.h"
#include "kv/kv_cache_manager.h"
#include "util/status.h"

namespace tachyon::engine {

struct Request;

class KvExportSink {
 public:
  virtual ~KvExportSink() = default;
  virtual void OnBlock(uint32_t index, const kv::BlockHash& hash,
                       std::span<const std::span<uint8_t>> chunks) = 0;
  virtual void OnEnd(Status status) = 0;
};

// Hands `r`'s newly computed full prompt blocks to its sink (no-op without one). Engine thread,
// after the step's KV is committed and before the request can finish.
void ExportComputedBlocks(Request* r, const kv::KvCacheManager& kv, kv::BlockBytes* bytes);
// Ends `r`'s export (OnEnd once; no-op without a sink or after the end).
void EndExport(Request* r, Status status);

}  // namespace tachyon::engine
