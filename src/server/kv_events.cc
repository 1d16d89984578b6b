#include "server/kv_events.h"

#include <algorithm>
#include <utility>

#include "server/sse.h"

namespace tachyon::server {
namespace {

using nlohmann::json;

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

HttpResponse Unavailable(const std::string& message) {
  json body = {
      {"error", {{"message", message}, {"type", "service_unavailable"}, {"code", "unavailable"}}}};
  return HttpResponse{503, "application/json", body.dump(), {{"Retry-After", "1"}}};
}

}  // namespace

KvEventPublisher::KvEventPublisher(std::shared_ptr<kv::KvEventLog> log,
                                   const GenerationBackend* backend, KvEventsOptions options)
    : log_(std::move(log)), backend_(backend), options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

KvEventPublisher::~KvEventPublisher() {
  Stop();
}

json KvEventPublisher::Load() const {
  const engine::EngineMetrics m = backend_->Metrics();
  return json{{"running", m.num_running},
              {"waiting", m.num_waiting},
              {"kv_usage", m.kv.Usage()},
              {"kv_blocks", m.kv.num_blocks}};
}

json KvEventPublisher::Info() const {
  bool draining;
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining = draining_;
  }
  return json{{"labels", options_.labels},
              {"block_size", options_.block_size},
              {"kv_events", !draining},
              {"load", Load()}};
}

size_t KvEventPublisher::subscribers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return subscribers_.size();
}

uint64_t KvEventPublisher::polls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return polls_;
}

void KvEventPublisher::Subscribe(const std::shared_ptr<ResponseChannel>& channel) {
  std::lock_guard<std::mutex> lock(mu_);
  if (draining_ || stop_) return channel->Respond(Unavailable("The replica is draining."));
  if (subscribers_.size() >= options_.max_subscribers) {
    return channel->Respond(Unavailable("Too many KV event subscribers."));
  }
  Subscriber s;
  s.channel = channel;
  s.closed = std::make_shared<std::atomic<bool>>(false);
  channel->SetOnClose([closed = s.closed] { *closed = true; });
  channel->StartStream({{"Cache-Control", "no-cache"}});
  subscribers_.push_back(std::move(s));
  cv_.notify_one();  // the snapshot goes out at once
}

bool KvEventPublisher::Feed(Subscriber& s) {
  if (*s.closed) return false;
  if (s.snapshot_started && s.snapshot_next >= s.snapshot.size()) {
    std::optional<std::vector<kv::KvEvent>> events =
        log_->ReadAfter(s.seq, options_.max_events_per_message);
    if (events && events->empty()) return true;
    if (events) {
      json list = json::array();
      for (const kv::KvEvent& e : *events) {
        list.push_back(json::array(
            {e.kind == kv::KvEvent::Kind::kStored ? "stored" : "removed", BlockHashHex(e.hash)}));
      }
      json msg = {{"type", "events"},
                  {"seq", events->front().seq},
                  {"time", static_cast<double>(events->front().time_us) * 1e-6},
                  {"events", std::move(list)}};
      s.seq = events->back().seq;
      return s.channel->Write(SseData(msg));
    }
    // Fell behind the log's window: start over from a snapshot.
    s.snapshot_started = false;
  }
  json msg;
  if (!s.snapshot_started) {
    kv::KvEventLog::Snapshot snap = log_->TakeSnapshot();
    s.seq = snap.seq;
    s.snapshot = std::move(snap.blocks);
    s.snapshot_next = 0;
    s.snapshot_started = true;
    msg = {{"type", "snapshot"},
           {"seq", s.seq},
           {"block_size", options_.block_size},
           {"labels", options_.labels},
           {"load", Load()}};
  } else {
    msg = {{"type", "snapshot_part"}};
  }
  const size_t end = std::min(s.snapshot.size(),
                              s.snapshot_next + std::max<size_t>(1, options_.snapshot_part_blocks));
  json blocks = json::array();
  for (size_t i = s.snapshot_next; i < end; ++i) blocks.push_back(BlockHashHex(s.snapshot[i]));
  s.snapshot_next = end;
  const bool complete = end >= s.snapshot.size();
  if (complete) {
    std::vector<kv::BlockHash>().swap(s.snapshot);
    s.snapshot_next = 0;
  }
  msg["blocks"] = std::move(blocks);
  msg["complete"] = complete;
  return s.channel->Write(SseData(msg));
}

void KvEventPublisher::Loop() {
  auto next_load = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    ++polls_;
    const auto now = std::chrono::steady_clock::now();
    const bool send_load = now >= next_load;
    std::string load;
    if (send_load) {
      json l = Load();
      l["type"] = "load";
      l["time"] = UnixSeconds();
      load = SseData(l);
      next_load = now + options_.load_interval;
    }
    for (size_t i = 0; i < subscribers_.size();) {
      Subscriber& s = subscribers_[i];
      bool alive = Feed(s);
      if (alive && send_load) alive = s.channel->Write(load);
      if (!alive) {
        if (!*s.closed) s.channel->EndStream();
        subscribers_.erase(subscribers_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    if (subscribers_.empty()) {
      // Nothing to feed: sleep until a subscriber (Subscribe notifies) or Stop.
      cv_.wait(lock, [&] { return stop_ || !subscribers_.empty(); });
    } else {
      cv_.wait_for(lock, options_.poll_interval);
    }
  }
}

void KvEventPublisher::Drain() {
  std::lock_guard<std::mutex> lock(mu_);
  if (draining_) return;
  draining_ = true;
  const std::string msg = SseData(json{{"type", "draining"}});
  for (Subscriber& s : subscribers_) {
    if (*s.closed) continue;
    // The events up to now first, so the router's index is current when the stream ends.
    if (Feed(s)) s.channel->Write(msg);
    s.channel->EndStream();
  }
  subscribers_.clear();
}

void KvEventPublisher::Stop() {
  Drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tachyon::server
