// OpenAiApi: routes HTTP requests (through the table in server/routes.h) to the OpenAI-compatible
// endpoints and the operational ones; docs/openapi.yaml describes them.
//
//   POST /v1/completions, /v1/chat/completions   generation (streamed or not)
//   GET  /v1/models, /v1/models/{id}              served model names
//   POST /v1/embeddings, /v1/rerank, /v1/score     pooling models (server/pooling_api.cc)
//   POST /tokenize, /detokenize                   the model's tokenizer
//   GET  /health (liveness), /health/ready        readiness: model loaded, not draining (/ready
//                                                 is the same)
//   GET  /metrics                                 Prometheus text
//   POST /v1/responses                            OpenAI Responses API (server/responses_api.h)
//   POST /v1/messages, /v1/messages/count_tokens  Anthropic Messages API (server/anthropic_api.h)
//   GET  /                                        the chat page (server/chat_page.h)
//   GET  /v1/kv_events, /v1/replica_info           prefix-cache events, labels and load for a
//                                                 router (server/kv_events.h)
//
// With an API key configured, /v1/*, /tokenize and /detokenize need
// "Authorization: Bearer <key>" or "x-api-key: <key>". Everything that can be rejected (JSON,
// parameters, model name, context length, auth, draining) is rejected before the backend sees the
// request. Thread-safety: Handle() may run concurrently on any number of io threads.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/backend.h"
#include "server/chat_constraints.h"
#include "server/generation_job.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/response_store.h"
#include "server/tool_calls.h"

namespace tachyon::server {

// What a replica reports beyond the engine: fields merged into GET /v1/replica_info and text
// appended to /metrics (server/pd_service.h: the prefill/decode role). Thread-safe.
class ReplicaInfoSource {
 public:
  virtual ~ReplicaInfoSource() = default;
  virtual nlohmann::json Info() const = 0;
  virtual std::string MetricsText() const = 0;
};

class KvEventPublisher;

struct ApiOptions {
  std::vector<std::string> served_model_names;  // first is reported; empty: backend's name
  std::string api_key;                          // "" = no authentication
  // How the model writes tool calls (from its chat template or --tool-call-parser); kNone:
  // chat replies are never parsed for tool calls.
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
  // For parameters a request leaves unset (e.g. from the model's generation_config.json).
  SamplingDefaults sampling_defaults;
  // The end of a reasoning section ("</think>", from the chat template: DetectReasoningEnd in
  // server/chat_constraints.h); "" = none. Constraints apply after it (server/chat_constraints.h).
  std::string reasoning_end;
  // Whether a constraint's output must end within max_tokens where the request does not say
  // (its "complete_within_max_tokens"; docs/grammar.md). --complete-within-max-tokens.
  bool complete_within_max_tokens = false;
  // Serves GET /v1/kv_events and /v1/replica_info; not owned, must outlive the API. Null: the
  // first is a 404 and the second reports no labels and no events.
  KvEventPublisher* kv_events = nullptr;
  // Prefill/decode disaggregation (server/pd_service.h): its role and KV address join
  // /v1/replica_info, its transfer counters /metrics. Not owned; null: role both.
  const ReplicaInfoSource* pd = nullptr;
};

class OpenAiApi {
 public:
  // `backend` must outlive this object and every job it starts.
  OpenAiApi(GenerationBackend* backend, ApiOptions options);

  void Handle(HttpRequest request, std::shared_ptr<ResponseChannel> channel);

  // Draining: readiness turns 503 and new generation requests get 503 (in-flight ones go on).
  void SetDraining(bool draining) { draining_ = draining; }
  // Generation requests the backend still holds.
  size_t InFlight() const { return jobs_->size(); }
  // Aborts every in-flight generation.
  void CancelAll() { jobs_->CancelAll(); }
  // Aborts every in-flight generation for shutdown (JobRegistry::DrainAll: a router's streams
  // end with the replica_draining marker).
  void DrainAll() { jobs_->DrainAll(); }

  ServerMetrics& metrics() { return *metrics_; }
  const std::string& model_name() const { return options_.served_model_names.front(); }

 private:
  void Route(HttpRequest request, std::shared_ptr<ResponseChannel> channel);
  void Completions(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel);
  void ChatCompletions(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel);
  // The chat path every chat-shaped API shares: parses a /v1/chat/completions body, checks it,
  // renders and tokenizes the prompt and starts the job, answering through `adapter` when set
  // (Responses, Anthropic Messages). Returns the error to send instead, if any.
  std::optional<ApiError> StartChat(const nlohmann::ordered_json& body, const char* endpoint,
                                    const char* id_prefix,
                                    std::shared_ptr<ChatOutputAdapter> adapter,
                                    std::shared_ptr<ResponseChannel> channel);
  void Responses(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel);
  void Messages(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel);
  void CountTokens(const HttpRequest& req, ResponseChannel& channel);
  void ChatPage(ResponseChannel& channel);
  void Tokenize(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel);
  void Detokenize(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel);
  // Pooling endpoints (server/pooling_api.cc); each refuses a model that cannot serve it (400).
  void Embeddings(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel);
  void Rerank(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel);
  void Score(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel);
  // Builds the 200 body from every input's result (in order) and the tokens they held.
  using PoolingFinish =
      std::function<nlohmann::json(std::vector<engine::PoolingResult>&, int64_t tokens)>;
  // Submits every input; once all are back, answers on the channel's executor: the first
  // error, else finish(results).
  void RunPooling(std::vector<engine::PoolingRequest> inputs,
                  std::shared_ptr<ResponseChannel> channel, const std::string& endpoint,
                  PoolingFinish finish);
  void ScorePairs(const std::vector<std::string>& queries, const std::vector<std::string>& docs,
                  std::shared_ptr<ResponseChannel> channel, const std::string& endpoint,
                  std::function<nlohmann::json(const std::vector<double>&, int64_t)> done);
  // `id` empty: the list; else that model (404 when not served).
  void Models(const std::string& id, ResponseChannel& channel);

  // Common checks for the generation endpoints; returns an error to send, if any.
  std::optional<ApiError> CheckModel(const std::string& model) const;
  // CheckModel plus limits the backend states (n).
  std::optional<ApiError> CheckCommon(const CommonParams& common) const;
  // Fills max_tokens from the context (or the default max_tokens less the tokens a continuation
  // resumes), or rejects a prompt that does not fit.
  std::optional<ApiError> FitContext(const CommonParams& common, size_t prompt_len,
                                     sampling::SamplingParams& sampling, const char* param) const;
  // complete_within_max_tokens (within): rejects a max_tokens below the least limit with which
  // the grammar promises a complete output (CompiledGrammar::MinTokenLimit), as FitContext
  // rejects a prompt that does not fit; a continuation's budget counts the tokens it resumes,
  // since its constraint began with them. g null or !within: nothing to check.
  std::optional<ApiError> FitGrammar(const grammar::CompiledGrammar* g, bool within,
                                     const sampling::SamplingParams& sampling) const;
  // The request's output grammar compiled by the backend (null when unconstrained); compile
  // errors are 400s naming the constraint's field.
  ApiResult<std::shared_ptr<const grammar::CompiledGrammar>> CompileConstraint(
      const std::optional<RequestedConstraint>& constraint) const;
  // Whether the output grammar (the constraint's, or a tool-call grammar) gets length-aware
  // masks: the request's complete_within_max_tokens, else the server's default.
  bool WithinMaxTokens(const std::optional<RequestedConstraint>& constraint) const;
  void SendError(ResponseChannel& channel, const ApiError& error, const std::string& endpoint);
  std::string NewId(const char* prefix);

  GenerationBackend* backend_;
  ApiOptions options_;
  // Shared with the jobs, which a backend thread may release after this object is gone.
  std::shared_ptr<ServerMetrics> metrics_ = std::make_shared<ServerMetrics>();
  std::shared_ptr<JobRegistry> jobs_ = std::make_shared<JobRegistry>();
  ResponseStore responses_;          // previous_response_id
  TriggerCache triggers_{backend_};  // the vocabulary's tool-call and reasoning triggers
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_{0};
  uint64_t id_salt_;
  int64_t created_;
};

}  // namespace tachyon::server
