// Internal to router/: ProxyCall, one client request carried to a replica — placement,
// queueing, the upstream attempt(s), retries, and the answer on the client's channel.
//
// Lifetime: shared; held by the upstream handlers of its current attempt, by the queue while
// queued, and (weakly) by the channel's OnClose. Thread-safety: its methods may run on the
// client connection's executor, the upstream strand of the current attempt and the queue
// pump at once; `mu_` guards the state they share.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "router/prompt_keys.h"
#include "router/router_core.h"
#include "server/http.h"
#include "server/protocol.h"

namespace tachyon::router {

struct ProxyRequest {
  server::HttpRequest http;
  bool stream = false;  // the body asked for "stream": true
  PromptBlocks blocks;  // empty when the prompt is unknown (not a generation, or unparsable)
  // A stream that can be migrated (router.h): `body` is what replicas get (http.body is its
  // dump), with return_token_ids and a seed; a continuation adds resume_token_ids.
  bool migratable = false;
  int choices = 1;  // its n
  bool chat = false;
  bool client_wants_token_ids = false;  // the client itself asked for return_token_ids
  nlohmann::ordered_json body;
  // Prefill/decode disaggregation (router/pd_route.h): the prefill replicas (no main attempt
  // while another replica is left), and whether the prompt may go through one first.
  uint64_t prefill_replicas = 0;
  bool prefill_first = false;
};

class ProxyCall : public std::enable_shared_from_this<ProxyCall> {
 public:
  ProxyCall(RouterCore* core, ProxyRequest request,
            std::shared_ptr<server::ResponseChannel> channel);
  ~ProxyCall();

  // Watches the client and places the request (or queues or rejects it). Call once.
  void Begin();
  // From the queue pump: places a queued request. False when every replica is still saturated
  // (the caller puts it back at the head of the queue); a request whose queue deadline passed
  // meanwhile then gets its 503 instead.
  bool TryFromQueue();
  // The queue deadline passed while it was queued: 503.
  void QueueTimedOut();

 private:
  enum class State { kNew, kQueued, kRunning, kFinished };
  enum class PlaceResult { kStarted, kSaturated, kRejected };

  PlaceResult Dispatch();          // REQUIRES: mu_ held
  void StartAttempt(int replica);  // REQUIRES: mu_ held
  // Sends the prompt to a prefill replica for the decode replica `p` was placed on
  // (router/pd_route.h); the attempt on it starts when the prefill ends. False when the
  // prefill tier is skipped (the caller starts the attempt). REQUIRES: mu_ held.
  bool StartPrefill(const Placement& p);
  void OnPrefillDone(int prefill, int decode, UpstreamOutcome outcome, int status);
  // A migratable stream: forwards one complete SSE event, noting its token ids and rewriting
  // a continuation's events into the original stream's. False when the client is gone.
  bool ForwardEvent(std::string_view event);
  bool WriteToClient(std::string data);
  // Re-issues the first unfinished choice of a migratable stream as a continuation on another
  // replica (after a failure, or after the continuation of an earlier choice ended).
  // REQUIRES: mu_ held.
  void Migrate();
  // The first choice of a migratable stream not finished yet, other than `except`; -1: none.
  int NextUnfinished(int except = -1) const;
  void OnHead(int status, const server::Headers& headers);
  bool OnData(std::string_view data);
  void OnDone(UpstreamOutcome outcome, const std::string& message);
  void ClientGone();
  // Answers the router's own error, counted under `reason`. REQUIRES: mu_ held.
  void Reject(const server::ApiError& error, const char* reason);
  void RejectQueueTimeout();  // 503, counted as queue_timeout
  void FinishLocked();  // REQUIRES: mu_ held
  // The current placement's prompt work on `replica` is done (its first output came, or the
  // attempt ended): ReplicaPool::PrefillDone, once.
  void SettlePrefill(int replica);
  // Ends a started stream with an SSE error event (a broken stream). REQUIRES: mu_ held.
  void EndStreamWithError(const std::string& message);

  RouterCore* const core_;
  const ProxyRequest request_;
  const std::shared_ptr<server::ResponseChannel> channel_;

  std::mutex mu_;
  State state_ = State::kNew;               // GUARDED_BY(mu_)
  uint64_t tried_ = 0;                      // GUARDED_BY(mu_) bit r: replica r was tried
  int attempts_ = 0;                        // GUARDED_BY(mu_)
  int replica_ = -1;                        // GUARDED_BY(mu_) the current attempt's
  bool client_gone_ = false;                // GUARDED_BY(mu_)
  // The queue timeout fired while PumpQueue held the call: TryFromQueue ends it if saturated.
  bool queue_timed_out_ = false;            // GUARDED_BY(mu_)
  bool prefill_tried_ = false;              // GUARDED_BY(mu_)
  std::shared_ptr<UpstreamCall> upstream_;  // GUARDED_BY(mu_)

  // The current attempt's response; only its upstream handlers touch these, and attempts
  // follow one another.
  int status_ = 0;
  server::Headers head_;
  bool passthrough_stream_ = false;  // a 200 event stream: forwarded as it comes
  bool stream_started_ = false;      // bytes of it reached the client's channel
  bool saw_done_ = false;            // "data: [DONE]" was forwarded
  bool too_large_ = false;
  bool replica_drained_ = false;  // the replica ended the stream with its drain marker
  int prefill_pending_ = 0;       // the placement's Placement::prefill_tokens, until settled
  std::string tail_;              // last bytes forwarded, to find [DONE] across pieces
  std::string body_;              // a non-streamed answer
  std::string sse_buf_;           // a migratable stream's incomplete event

  // Migration; attempts follow one another, as above.
  struct ChoiceState {
    std::vector<int32_t> tokens;  // token ids of its events forwarded so far
    size_t text_bytes = 0;        // bytes of its text forwarded so far
    bool opened = false;          // its opening event (a chat's role delta) was forwarded
    bool finished = false;        // its finish_reason was forwarded
  };
  std::string attempt_body_;          // the current attempt's body
  bool continuation_ = false;         // the current attempt resumes the stream
  int resuming_ = 0;                  // the choice it resumes (its events' index 0)
  int resumed_ = 0;                   // tokens it resumed
  size_t offset_base_ = 0;            // its choice's text bytes before it (logprob offsets)
  bool ids_missing_ = false;          // an event the router cannot account for came
  int failures_ = 0;                  // attempts that failed or were refused
  uint64_t failed_ = 0;               // bit r: an attempt on replica r failed
  std::vector<ChoiceState> choices_;  // by the client's choice index (request_.choices)
  nlohmann::ordered_json first_id_;   // the stream's "id" and "created" as the client saw them
  nlohmann::ordered_json first_created_;
};

}  // namespace tachyon::router
