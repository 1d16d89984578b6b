#include "router/etcd_discovery.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "server/json_limits.h"
#include "util/logging.h"

namespace tachyon::router {

using nlohmann::json;

std::string EncodeRegistration(const DiscoveredReplica& replica) {
  json labels = json::object();
  for (const auto& [k, v] : replica.labels) labels[k] = v;
  return json{{"url", replica.endpoint.url}, {"labels", labels}}.dump();
}

Result<DiscoveredReplica> DecodeRegistration(std::string_view value) {
  server::JsonLimits limits;
  limits.max_bytes = size_t{1} << 20;
  std::optional<json> j = server::ParseBoundedJson(value, limits);
  if (!j || !j->is_object()) return InvalidArgument("not a JSON object");
  auto url = j->find("url");
  if (url == j->end() || !url->is_string()) return InvalidArgument("no 'url' string");
  Result<Endpoint> e = ParseReplicaUrl(url->get<std::string>());
  if (!e.ok()) return e.status();
  DiscoveredReplica r{std::move(e).value(), {}};
  auto labels = j->find("labels");
  if (labels != j->end() && !labels->is_null()) {
    if (!labels->is_object()) return InvalidArgument("'labels' is not an object");
    for (const auto& [k, v] : labels->items()) {
      if (!v.is_string()) return InvalidArgument("label '" + k + "' is not a string");
      r.labels[k] = v.get<std::string>();
    }
  }
  return r;
}

// --- EtcdDiscovery -----------------------------------------------------------------------

EtcdDiscovery::EtcdDiscovery(std::unique_ptr<EtcdClient> client, std::string prefix,
                             std::chrono::milliseconds interval)
    : PollingDiscovery("etcd", interval), prefix_(std::move(prefix)), client_(std::move(client)) {}

EtcdDiscovery::~EtcdDiscovery() {
  Stop();
}

Result<std::vector<DiscoveredReplica>> EtcdDiscovery::Lookup() {
  ASSIGN_OR_RETURN(EtcdRange range, client_->RangePrefix(prefix_));
  revision_ = range.revision;
  std::vector<DiscoveredReplica> out;
  for (const EtcdKeyValue& kv : range.kvs) {
    Result<DiscoveredReplica> r = DecodeRegistration(kv.value);
    if (!r.ok()) {
      if (bad_.insert(kv.key).second) {
        TLOG(WARN) << "etcd key '" << kv.key << "' is not a replica registration ("
                   << r.status().message() << "); skipped";
      }
      continue;
    }
    out.push_back(std::move(r).value());
  }
  return out;
}

void EtcdDiscovery::AfterLookup(bool ok) {
  std::lock_guard<std::mutex> lock(watch_mu_);
  if (stopped_) return;
  if (!ok) {
    // etcd is unreachable: a watch that still looks open is not trusted; a new one starts
    // after the next successful range.
    if (watch_) watch_->Cancel();
    return;
  }
  if (watch_) return;
  auto marker = std::make_shared<int>(0);  // tells this watch's end from a later watch's
  std::weak_ptr<int> weak = marker;
  watch_ = client_->Watch(
      prefix_, revision_ + 1, [this] { Wake(); },
      [this, weak](const std::string& why) {
        std::lock_guard<std::mutex> lock(watch_mu_);
        if (weak.expired()) return;  // an older watch
        TLOG(DEBUG) << "etcd watch ended: " << why;
        watch_.reset();
        watch_marker_.reset();
      });
  watch_marker_ = std::move(marker);
}

void EtcdDiscovery::OnStop() {
  std::lock_guard<std::mutex> lock(watch_mu_);
  stopped_ = true;
  if (watch_) watch_->Cancel();
}

// --- EtcdRegistration --------------------------------------------------------------------

EtcdRegistration::EtcdRegistration(std::unique_ptr<EtcdClient> client, DiscoveredReplica self,
                                   std::string prefix, int64_t ttl_s)
    : client_(std::move(client)),
      key_(prefix + self.endpoint.host + ":" + std::to_string(self.endpoint.port)),
      value_(EncodeRegistration(self)),
      ttl_s_(std::max<int64_t>(ttl_s, 1)) {}

EtcdRegistration::~EtcdRegistration() {
  (void)Deregister();
}

void EtcdRegistration::Start() {
  thread_ = std::thread([this] { Run(); });
}

bool EtcdRegistration::Sleep(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stop_; });
}

void EtcdRegistration::Run() {
  const auto refresh = std::chrono::milliseconds(ttl_s_ * 1000 / 3);
  const auto retry = std::min(refresh, std::chrono::milliseconds(500));
  bool need_put = true;
  std::string last_error;
  auto failed = [&](const Status& st, const char* what) {
    registered_ = false;
    if (st.message() != last_error) {
      TLOG(WARN) << "etcd registration (" << key_ << "): " << what << ": " << st.message()
                 << "; retrying";
      last_error = st.message();
    }
  };
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    if (lease_ == 0) {
      Result<int64_t> lease = client_->GrantLease(ttl_s_);
      if (!lease.ok()) {
        failed(lease.status(), "lease grant");
        if (!Sleep(retry)) return;
        continue;
      }
      lease_ = *lease;
      need_put = true;
    } else {
      Result<int64_t> ttl = client_->KeepAlive(lease_);
      if (!ttl.ok()) {
        failed(ttl.status(), "keepalive");
        need_put = true;  // etcd may come back without the key
        if (!Sleep(retry)) return;
        continue;
      }
      if (*ttl == 0) {
        TLOG(INFO) << "etcd registration (" << key_ << "): the lease expired; registering again";
        registered_ = false;
        lease_ = 0;
        continue;
      }
    }
    if (need_put) {
      Status st = client_->Put(key_, value_, lease_);
      if (!st.ok()) {
        failed(st, "put");
        if (st.code() == StatusCode::kNotFound) lease_ = 0;  // etcd forgot the lease
        if (!Sleep(retry)) return;
        continue;
      }
      need_put = false;
      if (!registered_) {
        TLOG(INFO) << "registered in etcd at " << client_->url() << " as " << key_ << " (lease "
                   << ttl_s_ << " s)";
      }
      registered_ = true;
      last_error.clear();
    }
    if (!Sleep(refresh)) return;
  }
}

Status EtcdRegistration::Deregister() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return OkStatus();
    done_ = stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  registered_ = false;
  Status st = client_->Delete(key_);
  // An unreachable etcd is not asked twice (the lease expires on its own).
  if (lease_ != 0 && (st.ok() || st.code() != StatusCode::kUnavailable)) {
    Status revoked = client_->RevokeLease(lease_);
    if (st.ok()) st = revoked;
  }
  return st;
}

}  // namespace tachyon::router
