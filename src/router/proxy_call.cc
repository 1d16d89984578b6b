#include "router/proxy_call.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "server/json_limits.h"
#include "util/logging.h"

namespace tachyon::router {
namespace {

constexpr char kReplicaHeader[] = "X-Tachyon-Replica";
constexpr std::string_view kDoneEvent = "data: [DONE]";

server::ApiError RouterError(int status, std::string message, int retry_after_s) {
  server::ApiError e;
  e.http_status = status;
  e.message = std::move(message);
  e.type = status == 429 ? "rate_limit_error" : "service_unavailable";
  e.code = status == 429 ? "router_queue_full" : "no_replica_available";
  e.retry_after_s = retry_after_s;
  return e;
}

// The request header fields a replica needs; hop-by-hop fields stay behind.
server::Headers ForwardedHeaders(const server::HttpRequest& r) {
  server::Headers out;
  for (const char* name : {"content-type", "authorization", "accept", "user-agent"}) {
    std::string_view v = r.Header(name);
    if (!v.empty()) out.emplace_back(name, std::string(v));
  }
  return out;
}

// usage.prompt_tokens_details.cached_tokens of an answer or a stream's usage event, if any.
std::optional<int64_t> ReportedCached(const nlohmann::ordered_json& j) {
  auto u = j.find("usage");
  if (u == j.end() || !u->is_object()) return std::nullopt;
  auto d = u->find("prompt_tokens_details");
  if (d == u->end() || !d->is_object()) return std::nullopt;
  auto c = d->find("cached_tokens");
  if (c == d->end() || !c->is_number_integer()) return std::nullopt;
  return c->get<int64_t>();
}

std::string_view FindHeader(const server::Headers& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return {};
}

}  // namespace

ProxyCall::ProxyCall(RouterCore* core, ProxyRequest request,
                     std::shared_ptr<server::ResponseChannel> channel)
    : core_(core), request_(std::move(request)), channel_(std::move(channel)) {
  attempt_body_ = request_.http.body;
  if (request_.migratable) choices_.resize(static_cast<size_t>(request_.choices));
  core_->in_flight++;
}

ProxyCall::~ProxyCall() {
  std::lock_guard<std::mutex> lock(mu_);
  FinishLocked();
}

void ProxyCall::FinishLocked() {
  if (state_ == State::kFinished) return;
  state_ = State::kFinished;
  core_->in_flight--;
}

void ProxyCall::Begin() {
  std::weak_ptr<ProxyCall> weak = weak_from_this();
  channel_->SetOnClose([weak] {
    if (auto self = weak.lock()) self->ClientGone();
  });
  std::lock_guard<std::mutex> lock(mu_);
  if (Dispatch() != PlaceResult::kSaturated) return;
  state_ = State::kQueued;
  if (!core_->Enqueue(shared_from_this())) {
    Reject(
        RouterError(429, "every replica is at its in-flight limit and the router's queue is full",
                    core_->options.retry_after_s),
        "queue_full");
  }
}

ProxyCall::PlaceResult ProxyCall::Dispatch() {
  auto placed = core_->pool.Place(request_.blocks.hashes, request_.blocks.prompt_tokens,
                                  tried_ | request_.prefill_replicas, request_.blocks.key);
  if (request_.prefill_replicas != 0 && std::holds_alternative<PlaceError>(placed) &&
      std::get<PlaceError>(placed) == PlaceError::kNoReplica) {
    // No replica but prefill ones is left: a prefill replica serves the request itself.
    placed = core_->pool.Place(request_.blocks.hashes, request_.blocks.prompt_tokens, tried_,
                               request_.blocks.key);
  }
  if (const Placement* p = std::get_if<Placement>(&placed)) {
    core_->metrics.ObservePlacement(core_->pool.endpoint(p->replica).url, *p,
                                    request_.blocks.prompt_tokens);
    prefill_pending_ = p->prefill_tokens;
    if (request_.prefill_first && !prefill_tried_) {
      prefill_tried_ = true;
      if (StartPrefill(*p)) return PlaceResult::kStarted;
    }
    StartAttempt(p->replica);
    return PlaceResult::kStarted;
  }
  if (std::get<PlaceError>(placed) == PlaceError::kSaturated) return PlaceResult::kSaturated;
  if (attempts_ == 0) {
    Reject(RouterError(503, "no replica is available", core_->options.retry_after_s), "no_replica");
  } else {
    Reject(RouterError(503,
                       "the request failed on " + std::to_string(attempts_) +
                           " replica(s) and no other replica is available",
                       core_->options.retry_after_s),
           "retries_exhausted");
  }
  return PlaceResult::kRejected;
}

void ProxyCall::StartAttempt(int replica) {
  state_ = State::kRunning;
  replica_ = replica;
  tried_ |= uint64_t{1} << replica;
  attempts_++;
  status_ = 0;
  head_.clear();
  passthrough_stream_ = saw_done_ = too_large_ = replica_drained_ = false;
  tail_.clear();
  body_.clear();
  sse_buf_.clear();

  UpstreamRequest up;
  up.method = request_.http.method;
  up.target = request_.http.path;
  up.body = attempt_body_;
  up.headers = ForwardedHeaders(request_.http);
  UpstreamHandlers h;
  auto self = shared_from_this();
  h.on_head = [self](int status, const server::Headers& headers) { self->OnHead(status, headers); };
  h.on_data = [self](std::string_view data) { return self->OnData(data); };
  h.on_done = [self](UpstreamOutcome o, const std::string& m) { self->OnDone(o, m); };
  upstream_ = core_->client.Start(core_->pool.endpoint(replica), std::move(up),
                                  core_->options.timeouts, std::move(h));
}

bool ProxyCall::StartPrefill(const Placement& placed) {
  PdRouteState& pd = core_->pd;
  const int decode = placed.replica;
  if (request_.blocks.prompt_tokens - placed.predicted_cached_tokens <
      pd.options().min_prompt_tokens) {
    pd.Count("short");
    return false;
  }
  std::string address;
  for (const MemberRef& m : core_->pool.Members()) {
    if (m.replica == decode) address = pd.KvAddress(decode, m.generation);
  }
  if (address.empty()) {
    pd.Count("no_kv_listener");
    return false;
  }
  auto where = core_->pool.Place(request_.blocks.hashes, request_.blocks.prompt_tokens,
                                 ~request_.prefill_replicas, request_.blocks.key);
  const Placement* p = std::get_if<Placement>(&where);
  if (p == nullptr) {
    pd.Count("no_prefill");
    return false;
  }
  const int prefill = p->replica;
  std::optional<nlohmann::ordered_json> body = server::ParseBoundedOrderedJson(attempt_body_);
  if (!body || !body->is_object()) {  // the replica answers the malformed body itself
    core_->pool.PrefillDone(prefill, p->prefill_tokens);
    core_->pool.Release(prefill);
    return false;
  }
  state_ = State::kRunning;
  UpstreamRequest up;
  up.method = "POST";
  up.target = request_.http.path;
  up.body = PrefillBody(std::move(*body), address, pd.NextTransferId());
  up.headers = ForwardedHeaders(request_.http);
  auto status = std::make_shared<int>(0);
  UpstreamHandlers h;
  auto self = shared_from_this();
  h.on_head = [status](int s, const server::Headers&) { *status = s; };
  h.on_data = [](std::string_view) { return true; };  // its answer (one token) is not needed
  h.on_done = [self, prefill, decode, status, tokens = p->prefill_tokens](UpstreamOutcome o,
                                                                          const std::string&) {
    self->core_->pool.PrefillDone(prefill, tokens);
    self->OnPrefillDone(prefill, decode, o, *status);
  };
  upstream_ = core_->client.Start(core_->pool.endpoint(prefill), std::move(up),
                                  core_->options.timeouts, std::move(h));
  return true;
}

void ProxyCall::OnPrefillDone(int prefill, int decode, UpstreamOutcome outcome, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  upstream_.reset();
  core_->pool.Release(prefill);
  if (outcome == UpstreamOutcome::kConnect || outcome == UpstreamOutcome::kTimeout ||
      outcome == UpstreamOutcome::kBroken) {
    if (core_->pool.MarkFailed(prefill,
                               "prefill failed: " + std::string(UpstreamOutcomeName(outcome)))) {
      TLOG(WARN) << "prefill replica " << core_->pool.endpoint(prefill).url << " marked down";
    }
  }
  if (client_gone_) {
    SettlePrefill(decode);
    core_->pool.Release(decode);
    FinishLocked();
    return;
  }
  core_->pd.Count(outcome == UpstreamOutcome::kComplete && status == 200 ? "ok" : "failed");
  StartAttempt(decode);  // the decode replica computes whatever did not arrive
}

void ProxyCall::OnHead(int status, const server::Headers& headers) {
  status_ = status;
  head_ = headers;
  passthrough_stream_ =
      status == 200 && FindHeader(headers, "content-type").starts_with("text/event-stream");
}

void ProxyCall::SettlePrefill(int replica) {
  if (prefill_pending_ == 0) return;
  core_->pool.PrefillDone(replica, prefill_pending_);
  prefill_pending_ = 0;
}

bool ProxyCall::OnData(std::string_view data) {
  SettlePrefill(replica_);  // a replica writes a generation's first bytes with its first token
  if (!passthrough_stream_) {
    if (body_.size() + data.size() > core_->options.max_response_bytes) {
      too_large_ = true;
      return false;
    }
    body_.append(data);
    return true;
  }
  if (request_.migratable) {
    sse_buf_.append(data);
    size_t start = 0;
    for (size_t end; (end = sse_buf_.find("\n\n", start)) != std::string::npos; start = end + 2) {
      if (!ForwardEvent(std::string_view(sse_buf_).substr(start, end + 2 - start))) return false;
    }
    sse_buf_.erase(0, start);
    return true;
  }
  std::string window = tail_;
  window.append(data);
  if (window.find(kDoneEvent) != std::string::npos) saw_done_ = true;
  tail_ =
      window.size() > kDoneEvent.size() ? window.substr(window.size() - kDoneEvent.size()) : window;
  return WriteToClient(std::string(data));
}

bool ProxyCall::WriteToClient(std::string data) {
  if (!stream_started_) {
    stream_started_ = true;
    channel_->StartStream({{kReplicaHeader, core_->pool.endpoint(replica_).url}});
  }
  return channel_->Write(std::move(data));
}

bool ProxyCall::ForwardEvent(std::string_view event) {
  constexpr std::string_view kData = "data: ";
  if (!event.starts_with(kData)) return WriteToClient(std::string(event));
  const std::string_view payload = event.substr(kData.size(), event.size() - kData.size() - 2);
  // A continuation of one choice while others are still to resume: its end is not the
  // stream's (OnDone issues the next choice's continuation).
  const bool more = continuation_ && NextUnfinished(resuming_) >= 0;
  if (payload == "[DONE]") {
    saw_done_ = true;
    return more || WriteToClient(std::string(event));
  }
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(payload, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    ids_missing_ = true;  // not an event this router understands: no migration past it
    return WriteToClient(std::string(event));
  }
  if (auto e = j.find("error"); e != j.end() && e->is_object() &&
                                e->value("code", nlohmann::ordered_json()) == "replica_draining") {
    // The replica's grace period ended with this stream unfinished: resume it elsewhere (the
    // error and the [DONE] after it are not forwarded).
    replica_drained_ = true;
    return false;
  }
  if (first_id_.is_null()) {
    first_id_ = j.value("id", nlohmann::ordered_json());
    first_created_ = j.value("created", nlohmann::ordered_json());
  } else if (continuation_) {
    j["id"] = first_id_;
    j["created"] = first_created_;
  }
  auto choices = j.find("choices");
  if (choices != j.end() && choices->is_array() && !choices->empty() && (*choices)[0].is_object()) {
    nlohmann::ordered_json& c = (*choices)[0];
    // A continuation runs one choice as its index 0: renumbered to the client's index.
    if (continuation_) c["index"] = resuming_;
    auto index = c.find("index");
    if (index == c.end() || !index->is_number_integer() || index->get<int64_t>() < 0 ||
        index->get<int64_t>() >= static_cast<int64_t>(choices_.size())) {
      ids_missing_ = true;
      return WriteToClient(std::string(event));
    }
    ChoiceState& state = choices_[index->get<size_t>()];
    bool has_ids = false;
    if (auto ids = c.find("token_ids"); ids != c.end() && ids->is_array()) {
      for (const auto& t : *ids) {
        if (t.is_number_integer()) state.tokens.push_back(t.get<int32_t>());
      }
      has_ids = !ids->empty();
      if (!request_.client_wants_token_ids) c.erase(ids);
    }
    std::string text;
    bool opening = false;
    if (auto t = c.find("text"); t != c.end() && t->is_string()) text = t->get<std::string>();
    if (auto d = c.find("delta"); d != c.end() && d->is_object()) {
      if (auto ct = d->find("content"); ct != d->end() && ct->is_string()) {
        text = ct->get<std::string>();
      }
      opening = d->contains("role");
    }
    if (!text.empty() && !has_ids) ids_missing_ = true;  // a replica without return_token_ids
    state.text_bytes += text.size();
    // A completion's logprob text offsets count from the start of the choice's text; a
    // continuation's from the start of its own.
    if (auto lp = c.find("logprobs"); continuation_ && lp != c.end() && lp->is_object()) {
      if (auto off = lp->find("text_offset"); off != lp->end() && off->is_array()) {
        for (auto& o : *off) {
          if (o.is_number_integer()) o = o.get<int64_t>() + static_cast<int64_t>(offset_base_);
        }
      }
    }
    const bool finishing = c.contains("finish_reason") && !c["finish_reason"].is_null();
    if (!request_.chat) opening = !has_ids && text.empty() && !finishing;
    if (finishing) state.finished = true;
    // A choice opens once: a continuation's opening was sent by the attempt it resumes.
    if (opening && state.opened) return true;
    if (opening) state.opened = true;
  }
  if (std::optional<int64_t> cached = ReportedCached(j)) {
    core_->metrics.CountReportedCached(core_->pool.endpoint(replica_).url, *cached);
  }
  if (continuation_) {
    if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
      if (more) return true;  // the last choice's continuation reports the usage of the whole
      // Its prompt held the resumed tokens; the output is every choice's tokens.
      int64_t completion = 0;
      for (const ChoiceState& c : choices_) completion += static_cast<int64_t>(c.tokens.size());
      // (A replica's count; anything but a token count is taken as 0, never thrown on.)
      const auto reported = u->find("prompt_tokens");
      const uint64_t replica_prompt =
          reported != u->end() && reported->is_number_unsigned()
              ? std::min<uint64_t>(reported->get<uint64_t>(), std::numeric_limits<int32_t>::max())
              : 0;
      const int64_t prompt = std::max<int64_t>(0, static_cast<int64_t>(replica_prompt) - resumed_);
      (*u)["prompt_tokens"] = prompt;
      (*u)["completion_tokens"] = completion;
      if (u->contains("total_tokens")) (*u)["total_tokens"] = prompt + completion;
    }
  }
  return WriteToClient("data: " + j.dump() + "\n\n");
}

int ProxyCall::NextUnfinished(int except) const {
  for (size_t i = 0; i < choices_.size(); ++i) {
    if (!choices_[i].finished && static_cast<int>(i) != except) return static_cast<int>(i);
  }
  return -1;
}

void ProxyCall::Migrate() {
  resuming_ = std::max(0, NextUnfinished());
  nlohmann::ordered_json body = request_.body;
  if (request_.choices > 1) {
    // Choice i of a request samples with its seed + i (engine/engine.h): as a request of its
    // own (n = 1) it takes that seed.
    body["n"] = 1;
    body["seed"] = static_cast<int64_t>(static_cast<uint64_t>(body["seed"].get<int64_t>()) +
                                        static_cast<uint64_t>(resuming_));
  }
  const std::vector<int32_t>& tokens = choices_[resuming_].tokens;
  if (!tokens.empty()) body["resume_token_ids"] = tokens;
  attempt_body_ = body.dump();
  continuation_ = true;
  resumed_ = static_cast<int>(tokens.size());
  offset_base_ = choices_[resuming_].text_bytes;
  const PlaceResult r = Dispatch();
  if (r == PlaceResult::kSaturated) {
    state_ = State::kQueued;
    if (!core_->Enqueue(shared_from_this())) {
      Reject(RouterError(429, "no replica slot to resume the stream", core_->options.retry_after_s),
             "queue_full");
    }
  }
}

void ProxyCall::OnDone(UpstreamOutcome outcome, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  const int replica = replica_;
  const std::string url = core_->pool.endpoint(replica).url;
  upstream_.reset();
  SettlePrefill(replica);
  core_->pool.Release(replica);

  // A non-streamed generation the replica aborted (its shutdown grace ended; the router never
  // disconnects from an answer it is waiting for): nothing reached the client, try elsewhere.
  if (outcome == UpstreamOutcome::kComplete && !passthrough_stream_ && status_ == 200 &&
      (request_.http.path == "/v1/completions" || request_.http.path == "/v1/chat/completions") &&
      body_.find("\"finish_reason\":\"abort\"") != std::string::npos) {
    replica_drained_ = true;
  }
  const bool refused = outcome == UpstreamOutcome::kComplete && (status_ == 429 || status_ == 503);
  // A continuation answered with an error instead of a stream: busy (429 / 503, refused: it is
  // tried elsewhere), or another 4xx, a refusal of the continuation itself (the stream ends
  // with the error; the replica is not to blame).
  const bool resume_answered =
      outcome == UpstreamOutcome::kComplete && stream_started_ && !passthrough_stream_;
  const bool resume_refused = resume_answered && !refused && status_ >= 400 && status_ < 500;
  const bool failed =
      replica_drained_ || outcome == UpstreamOutcome::kConnect ||
      outcome == UpstreamOutcome::kTimeout || outcome == UpstreamOutcome::kBroken ||
      (outcome == UpstreamOutcome::kComplete && passthrough_stream_ && !saw_done_) ||
      (resume_answered && !refused && !resume_refused);
  std::string label = UpstreamOutcomeName(outcome);
  const bool client_left =
      !(replica_drained_ && !client_gone_) &&
      (client_gone_ || (outcome == UpstreamOutcome::kCancelled && !too_large_));
  if (replica_drained_ && !client_gone_) {
    label = "drained";
  } else if (client_left) {
    // A client that leaves once it has the stream's [DONE] (before the replica's answer has
    // ended) had the whole answer.
    label = passthrough_stream_ && saw_done_ && !failed ? "ok" : "client_gone";
  } else if (outcome == UpstreamOutcome::kComplete) {
    label = failed ? "broken" : refused || resume_refused ? "refused" : "ok";
  }
  core_->metrics.CountAttempt(url, label);
  if (failed || refused) {
    failures_++;
    failed_ |= uint64_t{1} << replica;
  }

  if (failed || (refused && status_ == 503)) {
    const std::string why = replica_drained_ ? "draining"
                            : failed         ? message.empty() ? "stream ended early" : message
                                             : "answered 503";
    if (core_->pool.MarkFailed(replica, why)) {
      TLOG(WARN) << "replica " << url << " marked down: " << why;
    }
  }

  if (client_left) {
    FinishLocked();
  } else if ((failed || refused) && !stream_started_) {
    if (attempts_ <= core_->options.max_retries) {
      core_->metrics.CountRetry();
      const PlaceResult r = Dispatch();
      if (r == PlaceResult::kSaturated) {
        state_ = State::kQueued;
        if (!core_->Enqueue(shared_from_this())) {
          Reject(RouterError(429,
                             "every replica is at its in-flight limit and the router's "
                             "queue is full",
                             core_->options.retry_after_s),
                 "queue_full");
        }
      }
    } else if (refused) {
      // The last replica's own 429 / 503 goes to the client as it was.
      server::HttpResponse res;
      res.status = status_;
      res.content_type = std::string(FindHeader(head_, "content-type"));
      res.body = std::move(body_);
      if (auto ra = FindHeader(head_, "retry-after"); !ra.empty()) {
        res.headers.emplace_back("Retry-After", std::string(ra));
      }
      res.headers.emplace_back(kReplicaHeader, url);
      channel_->Respond(std::move(res));
      FinishLocked();
    } else {
      Reject(RouterError(503,
                         "the request failed on " + std::to_string(attempts_) +
                             " replica(s) (last: " + url + ": " + message + ")",
                         core_->options.retry_after_s),
             "retries_exhausted");
    }
  } else if ((failed || refused) && request_.migratable && !ids_missing_ &&
             failures_ <= core_->options.max_retries) {
    // Output already reached the client: resume the stream on another replica.
    if (NextUnfinished() < 0) {
      // Cut after every choice's end: the client has the whole output (not the usage event
      // that would have followed).
      if (!saw_done_) channel_->Write(std::string(kDoneEvent) + "\n\n");
      channel_->EndStream();
      FinishLocked();
    } else {
      size_t sent = 0;
      for (const ChoiceState& c : choices_) sent += c.tokens.size();
      TLOG(WARN) << "stream from " << url << " cut after " << sent << " tokens were sent ("
                 << (replica_drained_ ? std::string("the replica drained") : message)
                 << "): migrating";
      core_->metrics.CountMigration();
      Migrate();
    }
  } else if (!failed && passthrough_stream_ && request_.migratable && continuation_ &&
             choices_[resuming_].finished && NextUnfinished() >= 0) {
    // The continuation of one choice ended; the next unfinished choice resumes now, on any
    // replica but those that failed.
    tried_ = failed_;
    Migrate();
  } else if (resume_refused) {
    const auto j = nlohmann::ordered_json::parse(body_, nullptr, false);
    std::string why = "HTTP " + std::to_string(status_);
    if (j.is_object() && j.contains("error") && j["error"].is_object() &&
        j["error"].value("message", nlohmann::ordered_json()).is_string()) {
      why += ": " + j["error"]["message"].get<std::string>();
    }
    TLOG(WARN) << "replica " << url << " refused to resume a stream (" << why << ")";
    EndStreamWithError(
        "the replica serving this stream failed and another refused to resume "
        "it (" +
        why + ")");
  } else if (failed || refused) {
    TLOG(WARN) << "stream from " << url << " cut after output was sent: " << message;
    EndStreamWithError("the replica serving this stream failed: " +
                       (message.empty() ? std::string("stream ended early") : message));
  } else if (too_large_) {
    server::ApiError e =
        RouterError(502, "the replica's answer is larger than the router relays", 0);
    e.type = "server_error";
    e.code = "response_too_large";
    server::HttpResponse res{502, "application/json", e.Body(), {}};
    channel_->Respond(std::move(res));
    FinishLocked();
  } else if (passthrough_stream_) {
    channel_->EndStream();
    FinishLocked();
  } else {
    server::HttpResponse res;
    res.status = status_;
    std::string_view ct = FindHeader(head_, "content-type");
    res.content_type = ct.empty() ? "application/json" : std::string(ct);
    res.body = std::move(body_);
    for (const char* name : {"retry-after", "allow"}) {
      if (auto v = FindHeader(head_, name); !v.empty())
        res.headers.emplace_back(name, std::string(v));
    }
    res.headers.emplace_back(kReplicaHeader, url);
    if (status_ == 200 && request_.http.method == "POST" &&
        request_.http.path.starts_with("/v1/")) {  // a completion's usage
      const auto j = nlohmann::ordered_json::parse(res.body, nullptr, false);
      if (std::optional<int64_t> cached = ReportedCached(j)) {
        core_->metrics.CountReportedCached(url, *cached);
      }
    }
    channel_->Respond(std::move(res));
    FinishLocked();
  }
  if (!core_->stopped) {
    // A slot was freed: offer it to the queue (outside this call's lock, on an io thread).
    RouterCore* core = core_;
    core->client.RunAfter(std::chrono::milliseconds(0), [core] { core->PumpQueue(); });
  }
}

void ProxyCall::ClientGone() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kFinished) return;
  client_gone_ = true;
  if (state_ == State::kQueued) {
    core_->RemoveQueued(this);
    FinishLocked();
  } else if (upstream_) {
    upstream_->Cancel();
  }
}

bool ProxyCall::TryFromQueue() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kQueued || Dispatch() != PlaceResult::kSaturated) return true;
  if (!queue_timed_out_) return false;  // back to the queue's front
  RejectQueueTimeout();
  return true;
}

void ProxyCall::QueueTimedOut() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kQueued) return;
  if (!core_->RemoveQueued(this)) {
    queue_timed_out_ = true;  // PumpQueue is offering it a slot: it ends there if none is free
    return;
  }
  RejectQueueTimeout();
}

void ProxyCall::RejectQueueTimeout() {
  Reject(RouterError(503, "no replica slot became free within the router's queue timeout",
                     core_->options.retry_after_s),
         "queue_timeout");
}

void ProxyCall::EndStreamWithError(const std::string& message) {
  core_->metrics.CountBrokenStream();
  server::ApiError e = RouterError(502, message, 0);
  e.type = "server_error";
  e.code = "replica_failed";
  channel_->Write("data: " + e.Body() + "\n\n");
  channel_->EndStream();
  FinishLocked();
}

void ProxyCall::Reject(const server::ApiError& error, const char* reason) {
  core_->metrics.CountRejected(reason);
  if (stream_started_) {
    // A migration found no replica: the client's stream is open, so it ends with the error.
    return EndStreamWithError(error.message);
  }
  server::HttpResponse res;
  res.status = error.http_status;
  res.body = error.Body();
  if (error.retry_after_s > 0) {
    res.headers.emplace_back("Retry-After", std::to_string(error.retry_after_s));
  }
  channel_->Respond(std::move(res));
  FinishLocked();
}

}  // namespace tachyon::router
