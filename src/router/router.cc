#include "router/router.h"

#include <algorithm>

#include <xxhash.h>

#include "router/kv_event_stream.h"
#include "router/proxy_call.h"
#include "router/router_core.h"
#include "server/json_limits.h"
#include "server/routes.h"
#include "util/logging.h"

namespace tachyon::router {
namespace {

server::HttpResponse Json(int status, const nlohmann::json& body) {
  return server::HttpResponse{status, "application/json", body.dump(), {}};
}

// The number of choices of a stream whose body can be resumed on another replica with identical
// text, or 0 when it cannot: one prompt, an integer seed (or none: the router sets one), and
// nothing whose state a continuation would not rebuild. A replica rebuilds the sampling draws
// (from the same output position), the output penalties' counts, the output constraint and
// the stop strings' held-back text and its reasoning / tool-call parsers' state from the tokens
// sent (server/protocol.h, resume_token_ids), and the router shifts completions' logprob text
// offsets; not rebuilt: echo, best_of. Each of n choices resumes on its own
// (ProxyCall::Migrate).
int MigratableChoices(const nlohmann::ordered_json& b, bool chat) {
  auto set = [&b](const char* key) { return b.contains(key) && !b[key].is_null(); };
  int64_t n = 1;
  if (set("n")) {
    if (!b["n"].is_number_integer() || b["n"].get<int64_t>() < 1) return 0;
    n = b["n"].get<int64_t>();
  }
  if (n > server::kMaxN) return 0;  // the replica answers its own 400
  if (set("best_of") && !(b["best_of"].is_number_integer() && b["best_of"].get<int64_t>() == 1)) {
    return 0;
  }
  if (set("seed") && !b["seed"].is_number_integer()) return 0;
  if (!chat && set("prompt") && b["prompt"].is_array() && !b["prompt"].empty() &&
      !b["prompt"][0].is_number() && b["prompt"].size() != 1) {
    return 0;  // several prompts
  }
  if (set("resume_token_ids")) return 0;
  if (set("echo") && !(b["echo"].is_boolean() && !b["echo"].get<bool>())) return 0;
  return static_cast<int>(n);
}

server::HttpResponse Error(const server::ApiError& e) {
  server::HttpResponse r{e.http_status, "application/json", e.Body(), {}};
  if (!e.allow.empty()) r.headers.emplace_back("Allow", e.allow);
  if (e.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(e.retry_after_s));
  return r;
}

}  // namespace

// --- RouterCore: the queue -------------------------------------------------------------

bool RouterCore::Enqueue(const std::shared_ptr<ProxyCall>& call) {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (queue_.size() >= static_cast<size_t>(options.max_queue)) return false;
    queue_.push_back(call);
  }
  std::weak_ptr<ProxyCall> weak = call;
  client.RunAfter(options.queue_timeout, [weak] {
    if (auto c = weak.lock()) c->QueueTimedOut();
  });
  return true;
}

bool RouterCore::RemoveQueued(const ProxyCall* call) {
  std::lock_guard<std::mutex> lock(queue_mu_);
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [call](const std::shared_ptr<ProxyCall>& c) { return c.get() == call; });
  if (it == queue_.end()) return false;
  queue_.erase(it);
  return true;
}

void RouterCore::PumpQueue() {
  for (;;) {
    std::shared_ptr<ProxyCall> call;
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      if (queue_.empty()) return;
      call = queue_.front();
      queue_.pop_front();
    }
    if (!call->TryFromQueue()) {
      std::lock_guard<std::mutex> lock(queue_mu_);
      queue_.push_front(std::move(call));
      return;
    }
  }
}

uint64_t RouterCore::NextSeed() {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return seeds_();
}

size_t RouterCore::QueueLength() const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return queue_.size();
}

// --- Router ----------------------------------------------------------------------------

Router::Router(const RouterOptions& options, const PromptKeys* keys)
    : core_(std::make_unique<RouterCore>(options, keys)) {}

Router::~Router() {
  Stop();
}

void Router::Start(std::unique_ptr<Discovery> discovery) {
  core_->discovery = std::move(discovery);
  // The first round of probes runs now; SetReplicas probes each replica that joins at once.
  Probe();
  core_->discovery->Start(
      [this](std::vector<DiscoveredReplica> set) { SetReplicas(std::move(set)); });
}

void Router::Stop() {
  core_->stopped = true;
  if (core_->discovery) core_->discovery->Stop();
  core_->client.Stop();
}

namespace {

// One GET /ready of `m`; its answer applies while `m` is still the member probed.
void ProbeOne(RouterCore* core, const MemberRef& m) {
  UpstreamTimeouts t;
  t.connect = t.read = core->options.probe_timeout;
  UpstreamRequest req;
  req.target = "/ready";
  auto status = std::make_shared<int>(0);
  UpstreamHandlers h;
  h.on_head = [status](int s, const server::Headers&) { *status = s; };
  h.on_data = [](std::string_view) { return true; };
  h.on_done = [core, m, status](UpstreamOutcome o, const std::string& message) {
    const bool ready = o == UpstreamOutcome::kComplete && *status == 200;
    const std::string why = o == UpstreamOutcome::kComplete
                                ? "/ready answered " + std::to_string(*status)
                                : "/ready: " + message;
    if (core->pool.SetProbeResult(m.replica, ready, why, m.generation)) {
      TLOG(INFO) << "replica " << m.endpoint.url << (ready ? " is up" : " is down: ")
                 << (ready ? "" : why);
      if (ready) core->PumpQueue();
    }
  };
  core->client.Start(m.endpoint, std::move(req), t, std::move(h));
}

}  // namespace

void Router::SetReplicas(std::vector<DiscoveredReplica> set) {
  if (core_->stopped) return;
  const MembershipChange change = core_->pool.SetMembers(set);
  for (const std::string& url : change.left) TLOG(INFO) << "replica " << url << " left";
  for (const std::string& url : change.refused) {
    TLOG(WARN) << "replica " << url << " left out: at most " << kMaxReplicas << " replicas";
  }
  ProbeKvListeners(core_.get());  // the new members' roles
  for (const MemberRef& m : change.joined) {
    TLOG(INFO) << "replica " << m.endpoint.url << " joined";
    ProbeOne(core_.get(), m);
    if (core_->options.kv_events) {
      StartKvEventStream(core_.get(), m, core_->options.probe_interval);
    }
  }
}

bool Router::Ready() const {
  return !core_->draining && core_->pool.AnyUp();
}
void Router::Drain() {
  core_->draining = true;
}
int Router::InFlight() const {
  return core_->in_flight;
}
const RouterMetrics& Router::metrics() const {
  return core_->metrics;
}
const ReplicaPool& Router::pool() const {
  return core_->pool;
}

void Router::Probe() {
  if (core_->stopped) return;
  RouterCore* core = core_.get();
  for (const MemberRef& m : core->pool.Members()) ProbeOne(core, m);
  ProbeKvListeners(core);
  core->client.RunAfter(std::max(core->options.probe_interval, std::chrono::milliseconds(10)),
                        [this] { Probe(); });
}

void Router::Handle(server::HttpRequest request, std::shared_ptr<server::ResponseChannel> channel) {
  const server::RouteMatch match = server::MatchRoute(request.method, request.path);
  if (match.route == nullptr) {
    server::ApiError e;
    if (match.path_known) {
      e.http_status = 405;
      e.message = "Method " + request.method + " is not allowed on " + request.path + ".";
      e.allow = match.allow;
    } else {
      e.http_status = 404;
      e.message = "Unknown path: " + request.path;
    }
    return channel->Respond(Error(e));
  }
  ProxyRequest proxied;
  switch (match.route->id) {
    case server::RouteId::kHealth:
      return channel->Respond(Json(200, {{"status", "ok"}}));
    case server::RouteId::kReady: {
      const bool ready = Ready();
      return channel->Respond(
          Json(ready ? 200 : 503, {{"status", ready             ? "ready"
                                              : core_->draining ? "draining"
                                                                : "no replica ready"}}));
    }
    case server::RouteId::kMetrics: {
      server::HttpResponse r;
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      std::vector<ReplicaState> members = core_->pool.Snapshot();
      std::erase_if(members, [](const ReplicaState& s) { return !s.member; });
      r.body = core_->metrics.Render(members, core_->QueueLength(), core_->pool.IndexedBlocks(),
                                     PolicyName(core_->options.pool.picker.policy));
      if (core_->discovery) RenderDiscoveryMetrics(core_->discovery->State(), r.body);
      r.body += core_->pd.MetricsText();
      return channel->Respond(std::move(r));
    }
    case server::RouteId::kChatCompletions:
    case server::RouteId::kCompletions: {
      const bool chat = match.route->id == server::RouteId::kChatCompletions;
      auto body = server::ParseOrderedJsonBody(request.body);
      if (!body.ok()) return channel->Respond(Error(body.error()));
      const nlohmann::ordered_json& b = body.value();
      proxied.stream = b.contains("stream") && b["stream"].is_boolean() && b["stream"].get<bool>();
      if (core_->keys) {
        std::optional<PromptBlocks> blocks =
            chat ? core_->keys->ForChat(b) : core_->keys->ForCompletion(nlohmann::json(b));
        if (blocks) proxied.blocks = std::move(*blocks);
      }
      // A prompt the router could not tokenize is named by its body, so that routers still
      // settle its ties (and canary share) alike.
      if (!proxied.blocks.key) {
        proxied.blocks.key = XXH3_64bits(request.body.data(), request.body.size());
      }
      // Prefill/decode disaggregation (router/pd_route.h): with a prefill replica in the set,
      // prefill replicas take no main attempt while another replica is left.
      proxied.prefill_replicas = core_->pd.prefill_mask();
      proxied.prefill_first = proxied.prefill_replicas != 0;
      const int choices = proxied.stream ? MigratableChoices(b, chat) : 0;
      if (choices > 0) {
        proxied.migratable = true;
        proxied.choices = choices;
        proxied.chat = chat;
        proxied.client_wants_token_ids = b.contains("return_token_ids") &&
                                         b["return_token_ids"].is_boolean() &&
                                         b["return_token_ids"].get<bool>();
        proxied.body = b;
        proxied.body["return_token_ids"] = true;
        // An unseeded request gets a seed here, so that a continuation draws what the first
        // replica would have (any seed is as random as the replica's own choice).
        if (!b.contains("seed") || b["seed"].is_null()) {
          proxied.body["seed"] = static_cast<int64_t>(core_->NextSeed() >> 1);
        }
        request.body = proxied.body.dump();
      }
      break;
    }
    case server::RouteId::kKvEvents:
    case server::RouteId::kReplicaInfo: {
      server::ApiError e;
      e.http_status = 404;
      e.message = request.path + " is a replica's endpoint; the router does not serve it.";
      return channel->Respond(Error(e));
    }
    default:
      break;
  }
  proxied.http = std::move(request);
  auto call = std::make_shared<ProxyCall>(core_.get(), std::move(proxied), std::move(channel));
  call->Begin();
}

}  // namespace tachyon::router
