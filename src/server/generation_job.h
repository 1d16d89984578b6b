// GenerationJob: one /v1/completions or /v1/chat/completions request in flight.
//
// It submits one backend request per choice (prompts x n), collects their chunks and answers on
// the ResponseChannel: as SSE chunks while streaming, or one JSON body at the end. Chunks arrive
// on the backend's thread and are only queued there; formatting (JSON, logprobs) runs on the
// channel's executor. A client that disconnects, or a failed choice, cancels every choice.
//
// JobRegistry tracks live jobs (a job stays registered until the backend has delivered the final
// chunk of every choice, i.e. until the engine holds nothing for it).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/backend.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/protocol.h"
#include "server/tool_calls.h"
#include "server/tool_stream.h"

namespace tachyon::server {

class GenerationJob;
struct JobSpec;

// Re-shapes a chat job's answer for another API (the Responses API, Anthropic's Messages API).
// With an adapter, GenerationJob hands it exactly what it would send on /v1/chat/completions
// (n = 1, include_usage on): the chat.completion.chunk events of a stream, the chat.completion
// body, or an error, and the adapter answers on the channel instead. Every call runs on the
// channel's executor, in order: Begin, then Chunk* and End (stream) or Complete (not streamed);
// Error may come instead of any of them, once. Implementations: server/responses_api.h,
// server/anthropic_api.h.
class ChatOutputAdapter {
 public:
  virtual ~ChatOutputAdapter() = default;
  // Before anything else (the stream head is not sent yet).
  virtual void Begin(const JobSpec& spec) = 0;
  // One chat.completion.chunk (after the stream head). Returns false when the channel refused
  // a write (the client is gone).
  virtual bool Chunk(const nlohmann::json& chunk, ResponseChannel& channel) = 0;
  // The stream is complete (after the usage chunk); the adapter ends the stream.
  virtual void End(ResponseChannel& channel) = 0;
  // Not streamed: the whole chat.completion body; the adapter responds.
  virtual void Complete(const nlohmann::json& completion, ResponseChannel& channel) = 0;
  // The request failed; `stream_started`: the head has gone out, so the error must be an event
  // and the adapter ends the stream, else the adapter responds with the error.
  virtual void Error(const ApiError& error, bool stream_started, ResponseChannel& channel) = 0;
};

// Thread-safe.
class JobRegistry {
 public:
  uint64_t Add(std::weak_ptr<GenerationJob> job);
  void Remove(uint64_t key);
  size_t size() const;
  // Cancels every live job (their clients get finish_reason "abort").
  void CancelAll();
  // Cancels every live job because the server shuts down: as CancelAll, except that a stream
  // that asked for return_token_ids (a router's, which can resume it) ends with an SSE error
  // event whose code is "replica_draining", the marker on which the router resumes the stream
  // on another replica (docs/router.md).
  void DrainAll();

 private:
  mutable std::mutex mu_;
  uint64_t next_key_ = 1;
  std::map<uint64_t, std::weak_ptr<GenerationJob>> jobs_;
};

struct JobPrompt {
  std::vector<int32_t> ids;
  std::string echo_text;              // sent before the completion when echo is on
  sampling::SamplingParams sampling;  // n: JobSpec::n
};

struct JobSpec {
  bool chat = false;
  std::string id;        // "cmpl-..." or "chatcmpl-..."
  std::string model;     // echoed in responses
  std::string endpoint;  // for metrics
  int64_t created = 0;   // unix seconds
  bool stream = false;
  bool include_usage = false;
  bool return_token_ids = false;  // stream deltas carry "token_ids" (CommonParams)
  bool echo = false;
  int n = 1;
  int priority = 0;
  std::string cache_salt;        // prefix-cache namespace of every prompt
  KvTransferTarget kv_transfer;  // run as a prefill for a decode replica (docs/pd.md)
  // Output constraint of every choice (null: unconstrained), compiled by the backend.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  bool grammar_within_max_tokens = false;  // EngineRequest::grammar_within_max_tokens
  std::vector<JobPrompt> prompts;
  std::chrono::steady_clock::time_point arrival;
  // Chat with tools: the generated text is parsed into tool calls in this format.
  ToolCallFormat tool_format = ToolCallFormat::kNone;
  std::string tool_prefix;  // forced start of a call, appended to the prompt (tool_choice)
  int max_tool_calls = 0;   // 1 with parallel_tool_calls = false; 0: no limit
  // The calls follow a tool-call grammar (server/tool_grammar.h) and are read by a
  // ToolCallStream: streamed as incremental argument deltas. tool_trigger "": the reply starts
  // inside the first call (tool_prefix opened it); else content until the trigger.
  bool tool_grammar = false;
  std::string tool_trigger;
  // Non-empty: the reply starts with a reasoning section ending with this text; it is answered
  // as `reasoning_content`, apart from the content (and the calls).
  std::string reasoning_end;
  // Another API's shape for a chat job (chat, n = 1, include_usage); null: OpenAI chat/completions.
  // An adapter gets each tool call whole (a head delta, then one with all its arguments) once
  // the reply is complete, never incremental argument deltas.
  std::shared_ptr<ChatOutputAdapter> adapter;
};

// The backend must outlive the job; metrics and registry are shared, so a job released on a
// backend thread after its API object is gone still finds them.
struct JobContext {
  GenerationBackend* backend;
  std::shared_ptr<ServerMetrics> metrics;
  std::shared_ptr<JobRegistry> registry;
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  // Submits every choice and arranges the answer on `channel`. Must run on the channel's
  // executor. On a submission error the client gets that error (429/503 with Retry-After).
  static void Start(JobSpec spec, JobContext ctx, std::shared_ptr<ResponseChannel> channel);

  GenerationJob(JobSpec spec, JobContext ctx, std::shared_ptr<ResponseChannel> channel);
  ~GenerationJob();

  // Aborts every choice. Thread-safe.
  void Cancel();
  // Cancel() because the server drains (JobRegistry::DrainAll). Thread-safe.
  void CancelForDrain();

 private:
  struct Choice {
    int prompt_index = 0;
    std::string text;
    size_t text_bytes = 0;  // generated bytes so far, echo excluded (for text_offset)
    bool echo_sent = false;
    nlohmann::json logprobs = nlohmann::json::array();
    bool finished = false;
    engine::FinishReason reason = engine::FinishReason::kStop;
    int completion_tokens = 0;
    int cached_tokens = 0;
    std::chrono::steady_clock::time_point first_token;
    bool has_first_token = false;
    std::unique_ptr<ToolCallParser> tools;      // chat with tools, unconstrained calls
    std::unique_ptr<ToolCallStream> stream;     // chat with tools, calls under a tool grammar
    std::unique_ptr<ReasoningSplit> reasoning;  // JobSpec::reasoning_end
    std::string reasoning_text;                 // non-streaming: the reasoning so far
    std::vector<ToolCall> calls;                // non-streaming: the calls parsed so far
    int num_calls = 0;
  };

  void OnChunk(size_t choice, engine::RequestOutput chunk);  // backend thread
  void Drain();                                              // executor
  // `arrived`: when the backend produced the chunk (timings are taken from it, not from when
  // the executor gets to it).
  void Handle(size_t index, engine::RequestOutput& chunk,
              std::chrono::steady_clock::time_point arrived);
  void OnClientGone();
  void Fail(const ApiError& error);
  void Complete();
  void WriteEvent(const nlohmann::json& event);
  nlohmann::json ChunkEnvelope() const;
  // `token_ids` (may be null): the delta's new ids, sent as "token_ids" with return_token_ids.
  nlohmann::json StreamDelta(size_t index, const std::string& text, const nlohmann::json& logprobs,
                             const std::vector<int32_t>* token_ids = nullptr) const;
  nlohmann::json LogprobsJson(Choice& c, const engine::RequestOutput& chunk) const;
  // Streams one completed tool call: a delta with id and name, then one with the arguments.
  void WriteToolCall(size_t index, int call_index, const ToolCall& call);
  // Streams one ToolCallStream delta (a call's head, or a piece of its arguments).
  void WriteToolDelta(size_t index, const ToolCallDelta& delta);
  std::string_view FinishName(const Choice& c) const;
  nlohmann::json UsageJson() const;
  nlohmann::json TimingsJson() const;
  nlohmann::json FinalBody() const;

  JobSpec spec_;
  JobContext ctx_;
  std::shared_ptr<ResponseChannel> channel_;
  uint64_t registry_key_ = 0;

  // Shared with backend threads.
  std::mutex mu_;
  struct Queued {
    size_t index;
    engine::RequestOutput chunk;
    std::chrono::steady_clock::time_point arrived;
  };
  std::deque<Queued> queue_;
  bool drain_scheduled_ = false;
  std::vector<uint64_t> handles_;
  bool cancelled_ = false;
  std::atomic<bool> draining_{false};

  // Executor only.
  std::vector<Choice> choices_;
  size_t finished_ = 0;
  bool stream_started_ = false;
  bool done_ = false;          // the client's answer is complete (or the client is gone)
  double queue_seconds_ = -1;  // from the backend, when it reports it
  engine::TtftBreakdown engine_ttft_;  // of the first choice to produce a token (if reported)
  std::chrono::steady_clock::time_point last_finish_ = std::chrono::steady_clock::now();
};

}  // namespace tachyon::server
