// Replica membership through etcd (`tachyon serve --register-etcd URL --advertise-url URL`,
// `tachyon route --etcd URL`).
//
// A replica's registration is the key PREFIX + "HOST:PORT" (its advertised address) whose
// value is {"url": "http://HOST:PORT", "labels": {...its --label...}}, attached to a lease of
// `ttl_s` seconds that EtcdRegistration keeps alive (every ttl/3). On SIGTERM the replica
// deregisters (deletes the key, revokes the lease) before it drains; a replica that dies
// leaves when its lease expires. When etcd comes back after an outage the registration
// refreshes its lease or, when etcd forgot it, grants a new one, and puts the key again.
//
// EtcdDiscovery reads every key under PREFIX (range) each `interval` and at once after any
// change (a watch from the range's revision), and publishes the set (PollingDiscovery: a
// failed range keeps the last set). Two keys with the same URL are one replica; a value that
// is not a registration is skipped (logged once).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "router/discovery.h"
#include "router/etcd_client.h"

namespace tachyon::router {

inline constexpr std::string_view kDefaultEtcdPrefix = "/tachyon/replicas/";

// The value of a registration key, and back. Decode errors: InvalidArgument.
std::string EncodeRegistration(const DiscoveredReplica& replica);
Result<DiscoveredReplica> DecodeRegistration(std::string_view value);

class EtcdDiscovery : public PollingDiscovery {
 public:
  EtcdDiscovery(std::unique_ptr<EtcdClient> client, std::string prefix,
                std::chrono::milliseconds interval);
  ~EtcdDiscovery() override;

 protected:
  Result<std::vector<DiscoveredReplica>> Lookup() override;
  void AfterLookup(bool ok) override;
  void OnStop() override;

 private:
  const std::string prefix_;
  int64_t revision_ = 0;       // of the last range (discovery thread only)
  std::set<std::string> bad_;  // keys whose value was logged as invalid (discovery thread)
  std::mutex watch_mu_;
  std::shared_ptr<UpstreamCall> watch_;  // GUARDED_BY(watch_mu_) null while none runs
  std::shared_ptr<int> watch_marker_;    // GUARDED_BY(watch_mu_) identifies the current watch
  bool stopped_ = false;                 // GUARDED_BY(watch_mu_)
  std::unique_ptr<EtcdClient> client_;   // last: destroyed first (its io thread runs handlers)
};

class EtcdRegistration {
 public:
  // Registers `self` under `prefix` + its HOST:PORT once Start() runs.
  EtcdRegistration(std::unique_ptr<EtcdClient> client, DiscoveredReplica self, std::string prefix,
                   int64_t ttl_s);
  ~EtcdRegistration();  // Deregister()

  // Starts the thread that registers and keeps the lease alive (retrying while etcd is down).
  void Start();
  // Stops the keep-alive, deletes the key and revokes the lease; each call bounded by the
  // client's timeout. Idempotent (later calls return OK).
  Status Deregister();
  // Whether the key is in etcd as far as the last call knew.
  bool registered() const { return registered_; }
  const std::string& key() const { return key_; }

 private:
  void Run();
  // Waits `d` or until Deregister. False when stopping.
  bool Sleep(std::chrono::milliseconds d);

  std::unique_ptr<EtcdClient> client_;
  const std::string key_, value_;
  const int64_t ttl_s_;
  int64_t lease_ = 0;  // the thread's; read by Deregister after the join
  std::atomic<bool> registered_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  bool done_ = false;  // Deregister ran
  std::thread thread_;
};

}  // namespace tachyon::router
