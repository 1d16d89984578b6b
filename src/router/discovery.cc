#include "router/discovery.h"

#include <algorithm>
#include <cstdio>

#include "util/logging.h"

namespace tachyon::router {
namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class StaticDiscovery : public Discovery {
 public:
  explicit StaticDiscovery(std::vector<DiscoveredReplica> replicas) {
    // The flags' order (round_robin starts with the first --replica); a URL twice counts once.
    for (DiscoveredReplica& e : replicas) {
      const bool seen = std::any_of(set_.begin(), set_.end(), [&e](const DiscoveredReplica& r) {
        return r.endpoint.url == e.endpoint.url;
      });
      if (!seen) set_.push_back(std::move(e));
    }
    state_.source = "static";
    state_.up = true;
    state_.replicas = set_.size();
    state_.last_success_unix = UnixNow();
  }
  void Start(OnChange on_change) override { on_change(set_); }
  void Stop() override {}
  DiscoveryState State() const override { return state_; }

 private:
  std::vector<DiscoveredReplica> set_;
  DiscoveryState state_;  // set by the constructor, read-only after
};

}  // namespace

std::unique_ptr<Discovery> NewStaticDiscovery(std::vector<Endpoint> replicas) {
  std::vector<DiscoveredReplica> set;
  for (Endpoint& e : replicas) set.push_back(DiscoveredReplica{std::move(e), {}});
  return std::make_unique<StaticDiscovery>(std::move(set));
}

std::unique_ptr<Discovery> NewStaticDiscovery(std::vector<DiscoveredReplica> replicas) {
  return std::make_unique<StaticDiscovery>(std::move(replicas));
}

PollingDiscovery::PollingDiscovery(std::string source, std::chrono::milliseconds interval)
    : interval_(std::max(interval, std::chrono::milliseconds(10))) {
  state_.source = std::move(source);
}

PollingDiscovery::~PollingDiscovery() {
  CHECK(!thread_.joinable());
}

void PollingDiscovery::Start(OnChange on_change) {
  on_change_ = std::move(on_change);
  thread_ = std::thread([this] { Run(); });
}

void PollingDiscovery::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  OnStop();
  if (thread_.joinable()) thread_.join();
}

void PollingDiscovery::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

DiscoveryState PollingDiscovery::State() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

void PollingDiscovery::Run() {
  std::vector<DiscoveredReplica> published;
  bool have_published = false;
  std::string last_error;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      woken_ = false;
    }
    Result<std::vector<DiscoveredReplica>> found = Lookup();
    if (found.ok()) {
      std::vector<DiscoveredReplica> set = std::move(found).value();
      std::sort(set.begin(), set.end(),
                [](const auto& a, const auto& b) { return a.endpoint.url < b.endpoint.url; });
      set.erase(std::unique(
                    set.begin(), set.end(),
                    [](const auto& a, const auto& b) { return a.endpoint.url == b.endpoint.url; }),
                set.end());
      if (!last_error.empty()) {
        TLOG(INFO) << "discovery (" << state_.source << ") is back: " << set.size()
                   << " replica(s)";
        last_error.clear();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        state_.up = true;
        state_.last_success_unix = UnixNow();
        state_.replicas = set.size();
        state_.last_error.clear();
      }
      if (!have_published || set != published) {
        published = set;
        have_published = true;
        on_change_(std::move(set));
      }
    } else {
      const std::string why = found.status().message();
      if (why != last_error) {
        TLOG(WARN) << "discovery (" << state_.source << ") failed: " << why << "; keeping "
                   << published.size() << " known replica(s)";
        last_error = why;
      }
      std::lock_guard<std::mutex> lock(mu_);
      state_.up = false;
      state_.failures++;
      state_.last_error = why;
    }
    AfterLookup(found.ok());
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, interval_, [this] { return stop_ || woken_; });
  }
}

void RenderDiscoveryMetrics(const DiscoveryState& s, std::string& out) {
  const std::string label = "{source=\"" + s.source + "\"}";
  char buf[64];
  auto line = [&](const char* name, const char* type, const char* help, double v) {
    out += std::string("# HELP ") + name + " " + help + "\n";
    out += std::string("# TYPE ") + name + " " + type + "\n";
    std::snprintf(buf, sizeof(buf), " %.15g\n", v);
    out += name + label + buf;
  };
  line("tachyon_router_discovery_up", "gauge",
       "1 while the replica discovery's lookups succeed; 0 while it keeps its last-known set.",
       s.up ? 1 : 0);
  line("tachyon_router_discovery_last_success_timestamp_seconds", "gauge",
       "Unix time of the discovery's last successful lookup.", s.last_success_unix);
  line("tachyon_router_discovery_replicas", "gauge",
       "Replicas in the set the discovery published last.", static_cast<double>(s.replicas));
  line("tachyon_router_discovery_failures_total", "counter", "Failed discovery lookups.",
       static_cast<double>(s.failures));
}

}  // namespace tachyon::router
