// Replica roles of prefill/decode disaggregation (docs/pd.md): `tachyon serve --role`.
//   both     prefill and decode in one replica (no KV transfer; the default)
//   prefill  runs prompts for decode replicas: requests with kv_transfer_params send their
//            prompt's KV blocks to the decode replica named there (server/pd_sender.h)
//   decode   listens for KV blocks on --kv-port (server/pd_receiver.h); a request whose prompt
//            blocks arrived computes only the rest
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "engine/serving_engine.h"
#include "kv/block_hash.h"
#include "kv/kv_wire.h"
#include "util/status.h"

namespace tachyon::server {

enum class ReplicaRole { kBoth, kPrefill, kDecode };

// "both", "prefill", "decode". Errors: InvalidArgument naming the value.
Result<ReplicaRole> ParseReplicaRole(std::string_view name);
std::string_view ReplicaRoleName(ReplicaRole role);

// The KV shape a transfer must match (kv/kv_wire.h): the engine's KV layout, block size, dtype
// and `model_id` (the model's identity, e.g. kv::ModelKvIdentity).
kv::KvWireShape KvShapeOf(const engine::ServingEngine& engine, model::KvDtype dtype,
                          const kv::BlockHash& model_id);

}  // namespace tachyon::server
