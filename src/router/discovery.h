// Discovery: where `tachyon route` learns its replica set. Three sources implement it: a
// static list (--replica), DNS (--dns NAME:PORT, router/dns_discovery.h) and etcd leases
// (--etcd URL, router/etcd_discovery.h). Router::Start hands each set to
// ReplicaPool::SetMembers, the one place membership changes.
//
// A source that cannot be reached keeps the last set it published (its replicas stay in the
// pool, and their health probes decide whether they take requests); State() says so.
//
// Thread-safety: Start and Stop from one thread; State() from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "router/upstream_client.h"
#include "util/status.h"

namespace tachyon::router {

struct DiscoveredReplica {
  Endpoint endpoint;
  std::map<std::string, std::string> labels;  // etcd registrations carry the replica's --label
  bool operator==(const DiscoveredReplica& o) const {
    return endpoint.url == o.endpoint.url && labels == o.labels;
  }
};

struct DiscoveryState {
  std::string source;            // "static", "dns" or "etcd"
  bool up = false;               // the last lookup succeeded
  double last_success_unix = 0;  // Unix seconds of the last successful lookup (0: none yet)
  size_t replicas = 0;           // replicas in the set published last
  int64_t failures = 0;          // failed lookups so far
  std::string last_error;        // why the last failed lookup failed
};

class Discovery {
 public:
  // The whole replica set, no URL twice: sorted by URL (DNS, etcd) or in the flags' order (a
  // static list). ReplicaPool::SetMembers gives new members slots in this order.
  using OnChange = std::function<void(std::vector<DiscoveredReplica>)>;
  virtual ~Discovery() = default;
  // Starts looking up. `on_change` gets the set after the first successful lookup and again
  // each time it differs, one call at a time, never after Stop() returned.
  virtual void Start(OnChange on_change) = 0;
  // Idempotent.
  virtual void Stop() = 0;
  virtual DiscoveryState State() const = 0;
};

// --replica URL...: published once, never changes.
std::unique_ptr<Discovery> NewStaticDiscovery(std::vector<Endpoint> replicas);
// The same with labels (tachyon route --prefill / --decode: role=prefill / role=decode).
std::unique_ptr<Discovery> NewStaticDiscovery(std::vector<DiscoveredReplica> replicas);

// The base of the sources that look up again and again (DNS, etcd): a thread runs Lookup()
// every `interval` (sooner after Wake()), publishes changed sets and keeps the state.
class PollingDiscovery : public Discovery {
 public:
  PollingDiscovery(std::string source, std::chrono::milliseconds interval);
  ~PollingDiscovery() override;  // REQUIRES: Stop() called (a subclass's destructor does)

  void Start(OnChange on_change) override;
  void Stop() override;
  DiscoveryState State() const override;

 protected:
  // The current set (any order, duplicates allowed), or why it could not be read. Runs on the
  // discovery thread.
  virtual Result<std::vector<DiscoveredReplica>> Lookup() = 0;
  // After each lookup, on the discovery thread (etcd: (re)starts or cancels its watch).
  virtual void AfterLookup(bool ok) { (void)ok; }
  // Called by Stop() before the thread is joined (cancel what could block).
  virtual void OnStop() {}
  // Makes the thread look up again now (any thread).
  void Wake();

 private:
  void Run();

  const std::chrono::milliseconds interval_;
  OnChange on_change_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;     // GUARDED_BY(mu_)
  bool woken_ = false;    // GUARDED_BY(mu_)
  DiscoveryState state_;  // GUARDED_BY(mu_)
};

// Appends the Prometheus lines of a discovery's state to `out`:
//   tachyon_router_discovery_up{source}                          1 while lookups succeed
//   tachyon_router_discovery_last_success_timestamp_seconds{source}
//   tachyon_router_discovery_replicas{source}                    replicas in the last set
//   tachyon_router_discovery_failures_total{source}              failed lookups
void RenderDiscoveryMetrics(const DiscoveryState& state, std::string& out);

}  // namespace tachyon::router
