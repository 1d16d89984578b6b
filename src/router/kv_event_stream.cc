#include "router/kv_event_stream.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "kv/kv_events.h"
#include "router/router_core.h"
#include "util/logging.h"

namespace tachyon::router {
namespace {

using nlohmann::json;

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

KvEventFeed::KvEventFeed(int replica, ReplicaPool* pool, RouterMetrics* metrics,
                         size_t max_event_bytes)
    : replica_(replica), pool_(pool), metrics_(metrics), max_event_bytes_(max_event_bytes) {}

void KvEventFeed::Reset() {
  buffer_.clear();
  have_snapshot_ = in_snapshot_ = draining_ = false;
  seq_ = 0;
  error_.clear();
}

bool KvEventFeed::Fail(std::string why) {
  error_ = std::move(why);
  pool_->SetEventsSynced(replica_, false);
  return false;
}

bool KvEventFeed::Consume(std::string_view bytes) {
  if (!error_.empty()) return false;
  buffer_.append(bytes);
  size_t start = 0;
  for (;;) {
    const size_t end = buffer_.find("\n\n", start);
    if (end == std::string::npos) break;
    // One event: its "data:" lines joined (the server writes one per event).
    std::string data;
    std::string_view event(buffer_.data() + start, end - start);
    while (!event.empty()) {
      const size_t nl = event.find('\n');
      std::string_view line = event.substr(0, nl);
      event = nl == std::string_view::npos ? std::string_view() : event.substr(nl + 1);
      if (line.rfind("data:", 0) == 0) {
        line.remove_prefix(5);
        if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        if (!data.empty()) data += '\n';
        data.append(line);
      }
    }
    start = end + 2;
    if (!data.empty() && !Message(data)) return false;
  }
  buffer_.erase(0, start);
  if (buffer_.size() > max_event_bytes_) {
    return Fail("an event longer than " + std::to_string(max_event_bytes_) + " bytes");
  }
  return true;
}

bool KvEventFeed::Blocks(const json& list, bool complete) {
  if (!list.is_array()) return Fail("a snapshot without a 'blocks' array");
  std::vector<BlockEvent> stored;
  stored.reserve(list.size());
  for (const json& h : list) {
    std::optional<kv::BlockHash> hash =
        h.is_string() ? kv::ParseBlockHashHex(h.get<std::string>()) : std::nullopt;
    if (!hash) return Fail("a snapshot block that is not a 32-digit hex hash");
    stored.push_back(BlockEvent{*hash, true});
  }
  pool_->ApplyBlockEvents(replica_, stored);
  if (complete) {
    in_snapshot_ = false;
    pool_->SetEventsSynced(replica_, true);
  }
  return true;
}

bool KvEventFeed::Message(std::string_view data) {
  json msg = json::parse(data.begin(), data.end(), nullptr, /*allow_exceptions=*/false);
  if (!msg.is_object() || !msg.contains("type") || !msg["type"].is_string()) {
    return Fail("a message that is not a JSON object with a 'type'");
  }
  const std::string type = msg["type"].get<std::string>();
  auto get_bool = [&msg](const char* key) {
    return msg.contains(key) && msg[key].is_boolean() && msg[key].get<bool>();
  };
  if (type == "snapshot") {
    if (!msg.contains("seq") || !msg["seq"].is_number_unsigned()) {
      return Fail("a snapshot without a 'seq'");
    }
    seq_ = msg["seq"].get<uint64_t>();
    have_snapshot_ = in_snapshot_ = true;
    labels_.clear();
    if (msg.contains("labels") && msg["labels"].is_object()) {
      for (const auto& [k, v] : msg["labels"].items()) {
        if (v.is_string()) labels_[k] = v.get<std::string>();
      }
    }
    pool_->BeginSnapshot(replica_);
    pool_->SetLabels(replica_, labels_);
    metrics_->CountKvResync(pool_->endpoint(replica_).url);
    if (msg.contains("load") && msg["load"].is_object()) {
      json load = msg["load"];
      load["type"] = "load";
      if (!Message(load.dump())) return false;
    }
    return Blocks(msg.contains("blocks") ? msg["blocks"] : json(), get_bool("complete"));
  }
  if (type == "snapshot_part") {
    if (!in_snapshot_) return Fail("a snapshot part outside a snapshot");
    return Blocks(msg.contains("blocks") ? msg["blocks"] : json(), get_bool("complete"));
  }
  if (type == "events") {
    if (!have_snapshot_ || in_snapshot_) return Fail("events before a complete snapshot");
    if (!msg.contains("seq") || !msg["seq"].is_number_unsigned() || !msg.contains("events") ||
        !msg["events"].is_array()) {
      return Fail("an events message without 'seq' and 'events'");
    }
    const uint64_t first = msg["seq"].get<uint64_t>();
    if (first != seq_ + 1) {
      return Fail("events from " + std::to_string(first) + " after " + std::to_string(seq_));
    }
    std::vector<BlockEvent> events;
    events.reserve(msg["events"].size());
    for (const json& e : msg["events"]) {
      std::optional<kv::BlockHash> hash;
      bool stored = false;
      if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        const std::string kind = e[0].get<std::string>();
        stored = kind == "stored";
        if (stored || kind == "removed") hash = kv::ParseBlockHashHex(e[1].get<std::string>());
      }
      if (!hash) return Fail("an event that is not [\"stored\"|\"removed\", hash]");
      events.push_back(BlockEvent{*hash, stored});
    }
    pool_->ApplyBlockEvents(replica_, events);
    seq_ += events.size();
    const double lag = msg.contains("time") && msg["time"].is_number()
                           ? UnixSeconds() - msg["time"].get<double>()
                           : 0.0;
    metrics_->CountKvEvents(pool_->endpoint(replica_).url, static_cast<int64_t>(events.size()),
                            std::max(0.0, lag));
    return true;
  }
  if (type == "load") {
    auto number = [&msg](const char* key) {
      return msg.contains(key) && msg[key].is_number() ? msg[key].get<double>() : 0.0;
    };
    ReplicaLoad load;
    load.running = static_cast<int>(std::clamp(number("running"), 0.0, 1e9));
    load.waiting = static_cast<int>(std::clamp(number("waiting"), 0.0, 1e9));
    load.kv_usage = std::clamp(number("kv_usage"), 0.0, 1.0);
    pool_->SetReportedLoad(replica_, load);
    return true;
  }
  if (type == "draining") {
    draining_ = true;
    pool_->SetEventsSynced(replica_, false);
    pool_->MarkFailed(replica_, "draining");
    return true;
  }
  return true;  // a message type this router does not know: ignored (newer replicas)
}

namespace {

struct Subscription : std::enable_shared_from_this<Subscription> {
  Subscription(RouterCore* c, const MemberRef& m, std::chrono::milliseconds d)
      : core(c),
        replica(m.replica),
        generation(m.generation),
        endpoint(m.endpoint),
        retry_delay(d),
        feed(m.replica, &c->pool, &c->metrics) {}

  bool Current() const { return core->pool.IsCurrent(replica, generation); }

  void Connect() {
    if (core->stopped || !Current()) return;
    feed.Reset();
    status = 0;
    UpstreamRequest req;
    req.target = "/v1/kv_events";
    req.headers.emplace_back("Accept", "text/event-stream");
    core->AuthorizeReplicaRequest(&req);
    UpstreamTimeouts t;
    t.connect = core->options.timeouts.connect;
    // The replica writes its load at least every 250 ms: a silent stream is a dead one.
    t.read = std::max(std::chrono::milliseconds(3000), 4 * retry_delay);
    auto self = shared_from_this();
    UpstreamHandlers h;
    h.on_head = [self](int s, const server::Headers&) { self->status = s; };
    h.on_data = [self](std::string_view data) {
      if (!self->Current()) return false;    // the replica left
      if (self->status != 200) return true;  // an error body: read to the end
      if (self->feed.Consume(data)) return true;
      TLOG(WARN) << "replica " << self->endpoint.url << ": KV events: " << self->feed.error()
                 << "; resubscribing";
      return false;
    };
    h.on_done = [self](UpstreamOutcome o, const std::string& message) { self->Ended(o, message); };
    core->client.Start(endpoint, std::move(req), t, std::move(h));
  }

  void Ended(UpstreamOutcome o, const std::string& message) {
    if (!Current()) return;  // the replica left: this subscription ends
    core->pool.SetEventsSynced(replica, false);
    const std::string why =
        status != 0 && status != 200 ? "/v1/kv_events answered " + std::to_string(status)
        : feed.draining()
            ? "the replica drains"
            : std::string(UpstreamOutcomeName(o)) + (message.empty() ? "" : ": " + message);
    if (why != last_why) {
      TLOG(INFO) << "replica " << endpoint.url << ": no KV events (" << why
                 << "); its index is approximate until they resume";
      last_why = why;
    }
    // A replica without the endpoint (404) is asked again rarely.
    const auto delay = status == 404 ? 10 * retry_delay : retry_delay;
    auto self = shared_from_this();
    core->client.RunAfter(delay, [self] { self->Connect(); });
  }

  RouterCore* const core;
  const int replica;
  const uint64_t generation;
  const Endpoint endpoint;
  const std::chrono::milliseconds retry_delay;
  KvEventFeed feed;
  int status = 0;
  std::string last_why;
};

}  // namespace

void StartKvEventStream(RouterCore* core, const MemberRef& member,
                        std::chrono::milliseconds retry_delay) {
  retry_delay = std::max(retry_delay, std::chrono::milliseconds(50));
  std::make_shared<Subscription>(core, member, retry_delay)->Connect();
}

}  // namespace tachyon::router
