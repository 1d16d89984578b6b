#include "server/pd_roles.h"

#include "model/kv_cache.h"

namespace tachyon::server {

Result<ReplicaRole> ParseReplicaRole(std::string_view name) {
  if (name == "both") return ReplicaRole::kBoth;
  if (name == "prefill") return ReplicaRole::kPrefill;
  if (name == "decode") return ReplicaRole::kDecode;
  return InvalidArgument("'" + std::string(name) + "' is not both, prefill or decode");
}

std::string_view ReplicaRoleName(ReplicaRole role) {
  switch (role) {
    case ReplicaRole::kBoth:
      return "both";
    case ReplicaRole::kPrefill:
      return "prefill";
    case ReplicaRole::kDecode:
      return "decode";
  }
  return "both";
}

kv::KvWireShape KvShapeOf(const engine::ServingEngine& e, model::KvDtype dtype,
                          const kv::BlockHash& model_id) {
  const model::ModelConfig& c = e.model->config();
  kv::KvWireShape s;
  s.model_id = model_id;
  s.dtype = static_cast<uint32_t>(dtype);
  s.block_size = static_cast<uint32_t>(e.block_size);
  s.n_layers = static_cast<uint32_t>(c.n_layers);
  s.layers_per_block = static_cast<uint32_t>(e.kv_layout.layers_per_block);
  s.n_kv_heads = static_cast<uint32_t>(c.n_kv_heads);
  s.head_dim = static_cast<uint32_t>(c.head_dim);
  s.num_chunks = 2 * s.layers_per_block;
  const size_t block =
      model::KvCache::BytesPerBlock(e.kv_layout, e.block_size, c.n_kv_heads, c.head_dim, dtype);
  s.chunk_bytes = s.num_chunks ? block / s.num_chunks : 0;
  return s;
}

}  // namespace tachyon::server
