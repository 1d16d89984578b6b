// PdService: what `tachyon serve --role prefill|decode` runs besides the HTTP server
// (docs/pd.md). Decode: the KV inbox (a store the engine loads from; give stores() to
// engine::ServingOptions::kv_stores before building the engine) and the KV listener. Prefill:
// the sender that requests with kv_transfer_params stream their KV through. Both: nothing.
// Thread-safety: Start / Stop on one thread; Info and metrics from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/serving_engine.h"
#include "kv/block_store.h"
#include "server/api.h"
#include "server/engine_backend.h"
#include "server/pd_receiver.h"
#include "server/pd_roles.h"
#include "server/pd_sender.h"

namespace tachyon::server {

struct PdServiceOptions {
  ReplicaRole role = ReplicaRole::kBoth;
  std::string kv_host = "127.0.0.1";  // decode: the KV listener's address
  int kv_port = 0;                    // 0: any free port
  // decode: the HOST:PORT prefill replicas reach the listener at, when not its own address
  // (NAT, a container's published port, a relay); reported as kv_address. "": the listener's.
  std::string kv_advertise;
  int64_t inbox_bytes = int64_t{1} << 30;
  double inbox_ttl_s = 120;
  double transfer_timeout_s = 30;  // the receiver's wait for the next bytes of a transfer
};

class PdService final : public ReplicaInfoSource {
 public:
  explicit PdService(PdServiceOptions options);
  ~PdService() override;  // Stop()

  // Stores for the engine (decode: the inbox; else none).
  std::vector<std::shared_ptr<kv::BlockStore>> stores() const;
  // Starts the role's side for the built engine: decode listens, prefill attaches its sender
  // to `backend`. `model_id`: the model's identity (both sides must compute it alike).
  // Errors: the listener's (address in use, bad host).
  Status Start(const engine::ServingEngine& engine, model::KvDtype dtype,
               const kv::BlockHash& model_id, EngineBackend* backend);
  // Stops listening / sending (after the engine stopped). Idempotent.
  void Stop();

  ReplicaRole role() const { return options_.role; }
  // {"role": ..., "kv_address": "HOST:PORT" (decode: kv_advertise or the listener's; else
  // null)} for /v1/replica_info.
  nlohmann::json Info() const override;
  // Prometheus text of the KV transfer counters (none for role both).
  std::string MetricsText() const override;

 private:
  PdServiceOptions options_;
  std::shared_ptr<KvInbox> inbox_;
  std::unique_ptr<PdReceiver> receiver_;
  std::unique_ptr<PdSender> sender_;
};

}  // namespace tachyon::server
