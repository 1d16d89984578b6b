#include "engine/pd_export.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/kv_groups.h"
#include "kv/kv_wire.h"

namespace tachyon::engine {

void KvExporter::Plan(const SchedulerOutput& out, kv::KvCacheManager* kv, kv::BlockBytes* bytes) {
  noted_.clear();
  next_layer_ = 0;
  bytes_ = bytes;
  kv_ = kv;
  for (const ScheduledSeq& s : out.seqs) {
    Request* r = s.request;
    if (!r->kv_export) continue;
    if (bytes == nullptr) {
      End(r, Unimplemented("this engine's KV has no raw block access"));
      continue;
    }
    const int groups = kv->num_groups();
    const size_t section = s.block_table.size() / static_cast<size_t>(groups);
    const int64_t bs = kv->block_size();
    const int64_t before = std::min(s.pos_start, r->num_prompt_tokens) / bs;
    const int64_t after =
        std::min(s.pos_start + s.num_new_tokens - s.num_draft_tokens, r->num_prompt_tokens) / bs;
    const int64_t full = std::min<int64_t>(after, static_cast<int64_t>(section));
    if (full <= r->kv_exported_blocks) continue;
    kv::ExtendBlockHashes(r->tokens, static_cast<int>(bs), kv::RootHash(r->cache_salt),
                          static_cast<size_t>(full), &r->kv_export_hashes);
    for (int64_t i = r->kv_exported_blocks; i < full; ++i) {
      for (int g = 0; g < groups; ++g) {
        const int32_t page = s.block_table[g * section + static_cast<size_t>(i)];
        if (page < 0) continue;  // a sliding group's, released
        kv->Pin(std::span(&page, 1));
        r->kv_export_pins.push_back(page);
        const Noted n{r, static_cast<uint32_t>(i), g, page};
        if (i < before) {  // computed before this step: every layer now
          for (int64_t l = 0; l < bytes->num_model_layers(); ++l) HandLayer(n, l, false);
        } else {
          noted_.push_back(n);
        }
      }
      if (i < before) r->kv_exported_blocks = i + 1;
    }
  }
}

void KvExporter::HandLayer(const Noted& n, int64_t layer, bool stored) {
  if (!n.r->kv_export) return;
  const kv::BlockBytes::LayerPlace place = bytes_->PlaceOf(layer);
  if (place.group != n.group) return;
  const int64_t per = bytes_->num_chunks() / bytes_->num_layers();
  std::vector<std::span<uint8_t>> chunks;
  chunks.reserve(static_cast<size_t>(per));
  for (int64_t c = place.slot * per; c < (place.slot + 1) * per; ++c) {
    chunks.push_back(bytes_->Chunk(n.block, c));
  }
  const kv::BlockHash& chained = n.r->kv_export_hashes[n.index];
  const kv::BlockHash key = n.group == 0 ? chained : kv::GroupBlockHash(chained, n.group);
  // The chunks' checksums: computed now that they were stored (in cache), and kept for the page
  // while the pool does not hand it out again; for a cached page, the kept ones if any.
  if (static_cast<size_t>(n.block) >= digests_.size()) {
    digests_.resize(std::max<size_t>(static_cast<size_t>(kv_->num_blocks()), n.block + 1));
  }
  PageDigests& d = digests_[static_cast<size_t>(n.block)];
  const uint32_t allocation = kv_->pool().allocations(n.block);
  if (d.allocation != allocation || !(d.key == key) || d.digests.empty()) {
    d.allocation = allocation;  // nothing kept for what the page holds now
    d.key = key;
    d.digests.assign(static_cast<size_t>(bytes_->num_chunks()), 0);
    d.have.assign(static_cast<size_t>(bytes_->num_chunks()), false);
  }
  const size_t first = static_cast<size_t>(place.slot * per);
  if (stored) {
    for (size_t i = 0; i < chunks.size(); ++i) {
      d.digests[first + i] = kv::KvWireChunkDigest(chunks[i]);
      d.have[first + i] = true;
    }
  }
  std::span<const uint64_t> digests;
  if (std::all_of(d.have.begin() + first, d.have.begin() + first + per, [](bool b) { return b; })) {
    digests = std::span(d.digests).subspan(first, chunks.size());
  }
  n.r->kv_export->OnLayer(n.index, static_cast<uint32_t>(n.group), key,
                          static_cast<uint32_t>(place.slot), chunks, digests);
}

void KvExporter::OnLayerStored(int64_t layer) {
  if (noted_.empty() || layer != next_layer_ || layer >= bytes_->num_model_layers()) return;
  for (const Noted& n : noted_) HandLayer(n, layer, true);
  ++next_layer_;
}

void KvExporter::Finish(bool step_ok) {
  if (step_ok) {
    for (; next_layer_ < (noted_.empty() ? 0 : bytes_->num_model_layers()); ++next_layer_) {
      for (const Noted& n : noted_) HandLayer(n, next_layer_, true);
    }
    for (const Noted& n : noted_) {
      n.r->kv_exported_blocks = std::max<int64_t>(n.r->kv_exported_blocks, n.index + 1);
    }
  }
  noted_.clear();
  next_layer_ = 0;
}

void KvExporter::End(Request* r, Status status) {
  if (!r->kv_export) return;
  std::shared_ptr<KvExportSink> sink = std::move(r->kv_export);
  r->kv_export = nullptr;
  sink->OnEnd(std::move(status));
  if (!r->kv_export_pins.empty()) held_.push_back({std::move(sink), std::move(r->kv_export_pins)});
  r->kv_export_pins.clear();
}

void KvExporter::ReleaseDone(kv::KvCacheManager* kv) {
  std::erase_if(held_, [&](Held& h) {
    if (h.sink->ReadsPool()) return false;
    kv->Unpin(h.pins);
    return true;
  });
}

}  // namespace tachyon::engine
