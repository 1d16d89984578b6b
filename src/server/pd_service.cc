#include "server/pd_service.h"

#include <sstream>

#include "util/logging.h"

namespace tachyon::server {

PdService::PdService(PdServiceOptions options) : options_(std::move(options)) {
  if (options_.role == ReplicaRole::kDecode) {
    inbox_ = std::make_shared<KvInbox>(
        options_.inbox_bytes,
        std::chrono::milliseconds(static_cast<int64_t>(options_.inbox_ttl_s * 1000)));
  }
}

PdService::~PdService() {
  Stop();
}

std::vector<std::shared_ptr<kv::BlockStore>> PdService::stores() const {
  if (!inbox_) return {};
  return {inbox_};
}

Status PdService::Start(const engine::ServingEngine& engine, model::KvDtype dtype,
                        const kv::BlockHash& model_id, EngineBackend* backend) {
  const kv::KvWireShape shape = KvShapeOf(engine, dtype, model_id);
  if (options_.role == ReplicaRole::kBoth) return OkStatus();
  if (Status s = kv::ValidateShape(shape); !s.ok()) {
    return s.WithContext("--role " + std::string(ReplicaRoleName(options_.role)));
  }
  if (options_.role == ReplicaRole::kPrefill) {
    sender_ = std::make_unique<PdSender>(kv::NewTcpTransport(), shape);
    backend->SetKvSender(sender_.get());
    return OkStatus();
  }
  PdReceiverOptions ro;
  ro.idle_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(options_.transfer_timeout_s * 1000));
  receiver_ = std::make_unique<PdReceiver>(kv::NewTcpTransport(), shape, inbox_, ro);
  const std::string address = options_.kv_host.find(':') != std::string::npos
                                  ? "[" + options_.kv_host + "]:" + std::to_string(options_.kv_port)
                                  : options_.kv_host + ":" + std::to_string(options_.kv_port);
  if (Status s = receiver_->Start(address); !s.ok()) return s.WithContext("--kv-port");
  TLOG(INFO) << "KV listener at " << receiver_->address() << " (" << shape.block_bytes()
             << " bytes a block)";
  return OkStatus();
}

void PdService::Stop() {
  if (receiver_) receiver_->Stop();
  if (sender_) sender_->Stop();
}

nlohmann::json PdService::Info() const {
  nlohmann::json j{{"role", ReplicaRoleName(options_.role)}, {"kv_address", nullptr}};
  if (receiver_) {
    j["kv_address"] = options_.kv_advertise.empty() ? receiver_->address() : options_.kv_advertise;
  }
  return j;
}

std::string PdService::MetricsText() const {
  const PdTransferCounters* c = receiver_ ? &receiver_->counters()
                                : sender_ ? &sender_->counters()
                                          : nullptr;
  if (c == nullptr) return "";
  const char* dir = receiver_ ? "received" : "sent";
  std::ostringstream o;
  o << "# HELP tachyon_kv_transfer_bytes_total KV transfer bytes " << dir << ".\n"
    << "# TYPE tachyon_kv_transfer_bytes_total counter\n"
    << "tachyon_kv_transfer_bytes_total{direction=\"" << dir << "\"} " << c->bytes.load() << "\n"
    << "# HELP tachyon_kv_transfer_blocks_total KV blocks " << dir << " (received: kept).\n"
    << "# TYPE tachyon_kv_transfer_blocks_total counter\n"
    << "tachyon_kv_transfer_blocks_total{direction=\"" << dir << "\"} " << c->blocks.load() << "\n"
    << "# HELP tachyon_kv_transfers_total KV transfers by outcome (failed: the decode replica "
       "recomputes what did not arrive).\n"
    << "# TYPE tachyon_kv_transfers_total counter\n"
    << "tachyon_kv_transfers_total{direction=\"" << dir << "\",outcome=\"ok\"} "
    << c->transfers_ok.load() << "\n"
    << "tachyon_kv_transfers_total{direction=\"" << dir << "\",outcome=\"failed\"} "
    << c->transfers_failed.load() << "\n"
    << "# HELP tachyon_kv_transfer_seconds_total Time spent in KV transfers.\n"
    << "# TYPE tachyon_kv_transfer_seconds_total counter\n"
    << "tachyon_kv_transfer_seconds_total{direction=\"" << dir << "\"} "
    << static_cast<double>(c->micros.load()) / 1e6 << "\n";
  if (sender_) {
    o << "# HELP tachyon_kv_transfer_tail_seconds_total Time prefill answers waited for their "
         "KV transfer to end after their last forward pass.\n"
      << "# TYPE tachyon_kv_transfer_tail_seconds_total counter\n"
      << "tachyon_kv_transfer_tail_seconds_total{direction=\"sent\"} "
      << static_cast<double>(c->tail_micros.load()) / 1e6 << "\n";
  }
  if (inbox_) {
    const kv::BlockStoreStats s = inbox_->Stats();
    o << "# HELP tachyon_kv_inbox_blocks Received KV blocks held, not loaded yet.\n"
      << "# TYPE tachyon_kv_inbox_blocks gauge\n"
      << "tachyon_kv_inbox_blocks " << s.blocks << "\n"
      << "# HELP tachyon_kv_inbox_bytes Bytes of received KV blocks held.\n"
      << "# TYPE tachyon_kv_inbox_bytes gauge\n"
      << "tachyon_kv_inbox_bytes " << s.bytes << "\n";
  }
  return o.str();
}

}  // namespace tachyon::server
