#include "engine/pd_export.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "engine/request.h"

namespace tachyon::engine {

void ExportComputedBlocks(Request* r, const kv::KvCacheManager& kv, kv::BlockBytes* bytes) {
  if (!r->kv_export) return;
  if (bytes == nullptr || kv.num_groups() != 1) {
    EndExport(r, Unimplemented(bytes == nullptr ? "this engine's KV has no raw block access"
                                                : "KV export of layer-grouped (hybrid) caches"));
    return;
  }
  const int64_t bs = kv.block_size();
  const int64_t full = std::min(r->num_computed_tokens, r->num_prompt_tokens) / bs;
  if (full <= r->kv_exported_blocks || !kv.HasRequest(r->seq_id)) return;
  kv::ExtendBlockHashes(r->tokens, static_cast<int>(bs), kv::RootHash(r->cache_salt),
                        static_cast<size_t>(full), &r->kv_export_hashes);
  const std::vector<int32_t>& table = kv.BlockTable(r->seq_id);
  for (int64_t i = r->kv_exported_blocks; i < full && i < static_cast<int64_t>(table.size()); ++i) {
    const std::vector<std::span<uint8_t>> chunks = bytes->Chunks(table[i]);
    r->kv_export->OnBlock(static_cast<uint32_t>(i), r->kv_export_hashes[i], chunks);
    r->kv_exported_blocks = i + 1;
  }
}

void EndExport(Request* r, Status status) {
  if (!r->kv_export) return;
  std::shared_ptr<KvExportSink> sink = std::move(r->kv_export);
  r->kv_export = nullptr;
  sink->OnEnd(std::move(status));
}

}  // namespace tachyon::engine
