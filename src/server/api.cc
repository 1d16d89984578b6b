#include "server/api.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>

#include "server/anthropic_api.h"
#include "server/chat_page.h"
#include "server/json_limits.h"
#include "server/kv_events.h"
#include "server/protocol.h"
#include "server/responses_api.h"
#include "server/routes.h"
#include "util/logging.h"

namespace tachyon::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr const char* kCompletions = "/v1/completions";
constexpr const char* kChat = "/v1/chat/completions";
constexpr const char* kResponsesPath = "/v1/responses";
constexpr const char* kMessagesPath = "/v1/messages";
constexpr const char* kCountTokensPath = "/v1/messages/count_tokens";

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

HttpResponse JsonResponse(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = DumpJson(body);
  return r;
}

ApiError Simple(int status, std::string type, std::string message) {
  ApiError e;
  e.http_status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  return e;
}

bool NeedsAuth(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
}

// The endpoint a request is counted under in the metrics: its route's path (a pattern for a
// route with a parameter), never the path the client sent (each distinct one would be a series
// of its own, kept forever); "" (not counted) for an unknown path or an uncounted one.
std::string MetricsEndpoint(const RouteMatch& match, const std::string& path) {
  return match.route != nullptr && NeedsAuth(path) ? std::string(match.route->path) : "";
}

}  // namespace

OpenAiApi::OpenAiApi(GenerationBackend* backend, ApiOptions options)
    : backend_(backend), options_(std::move(options)), created_(UnixNow()) {
  if (options_.served_model_names.empty()) {
    options_.served_model_names.push_back(backend_->Info().name);
  }
  id_salt_ = std::random_device{}();
  id_salt_ = (id_salt_ << 32) ^ std::random_device{}();
}

std::string OpenAiApi::NewId(const char* prefix) {
  uint64_t n = next_id_.fetch_add(1) + 1;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s-%016llx%08llx", prefix,
                static_cast<unsigned long long>(id_salt_), static_cast<unsigned long long>(n));
  return buf;
}

void OpenAiApi::SendError(ResponseChannel& channel, const ApiError& error,
                          const std::string& endpoint) {
  // Anthropic's routes answer errors in Anthropic's shape.
  const bool anthropic = IsAnthropicPath(endpoint);
  if (!endpoint.empty()) metrics_->CountRequest(endpoint, error.http_status);
  channel.Respond(ErrorResponse(error, anthropic ? AnthropicErrorBody(error) : error.Body()));
}

void OpenAiApi::Handle(HttpRequest req, std::shared_ptr<ResponseChannel> channel) {
  // Last resort: a bug that throws becomes a 500 for this request, never a dead io thread.
  const std::string path = req.path;
  const std::string method = req.method;
  try {
    Route(std::move(req), channel);
  } catch (const std::exception& e) {
    TLOG(ERROR) << path << ": internal error: " << e.what();
    SendError(*channel, Simple(500, "server_error", "Internal error."),
              MetricsEndpoint(MatchRoute(method, path), path));
  }
}

void OpenAiApi::Route(HttpRequest req, std::shared_ptr<ResponseChannel> channel) {
  const std::string& path = req.path;
  RouteMatch match = MatchRoute(req.method, path);
  if (NeedsAuth(path) && !options_.api_key.empty()) {
    // The Bearer key (OpenAI's clients) or x-api-key (Anthropic's).
    std::string_view auth = req.Header("authorization");
    std::string_view x_api_key = req.Header("x-api-key");
    if (auth != "Bearer " + options_.api_key && x_api_key != options_.api_key) {
      ApiError e = Simple(401, "authentication_error",
                          auth.empty() && x_api_key.empty()
                              ? "Missing API key: pass it as 'Authorization: Bearer KEY' or "
                                "'x-api-key: KEY'."
                              : "Incorrect API key provided.");
      e.code = "invalid_api_key";
      return SendError(*channel, e, MetricsEndpoint(match, path));
    }
  }
  if (match.route == nullptr) {
    if (match.path_known) {
      ApiError e = Simple(405, "invalid_request_error",
                          "Method " + req.method + " is not allowed on " + path + ".");
      e.allow = match.allow;
      if (IsAnthropicPath(path)) return channel->Respond(ErrorResponse(e, AnthropicErrorBody(e)));
      return SendError(*channel, e, "");
    }
    return SendError(*channel, Simple(404, "invalid_request_error", "Unknown path: " + path), "");
  }
  const RouteId rid = match.route->id;
  // (/v1/messages answers in Anthropic's error shape: its own path refuses a pooling model.)
  if ((rid == RouteId::kCompletions || rid == RouteId::kChatCompletions ||
       rid == RouteId::kResponses) &&
      !backend_->Info().generates) {
    ApiError e =
        InvalidParam("model", "This model serves " +
                                  std::string(backend_->Info().reranker
                                                  ? "relevance scores (/v1/rerank, /v1/score)"
                                                  : "embeddings (/v1/embeddings)") +
                                  "; it cannot generate text.");
    e.code = "model_does_not_support_endpoint";
    return SendError(*channel, e, path);
  }
  switch (match.route->id) {
    case RouteId::kEmbeddings:
      return Embeddings(req, channel);
    case RouteId::kRerank:
      return Rerank(req, channel);
    case RouteId::kScore:
      return Score(req, channel);
    case RouteId::kCompletions:
      return Completions(req, channel);
    case RouteId::kChatCompletions:
      return ChatCompletions(req, channel);
    case RouteId::kResponses:
      return Responses(req, channel);
    case RouteId::kMessages:
      return Messages(req, channel);
    case RouteId::kCountTokens:
      return CountTokens(req, *channel);
    case RouteId::kChatPage:
      return ChatPage(*channel);
    case RouteId::kTokenize:
      return Tokenize(req, channel);
    case RouteId::kDetokenize:
      return Detokenize(req, channel);
    case RouteId::kModels:
    case RouteId::kModel:
      return Models(std::string(match.param), *channel);
    case RouteId::kHealth:
      return channel->Respond(JsonResponse(200, {{"status", "ok"}}));
    case RouteId::kReady: {
      bool ready = backend_->Ready() && !draining_;
      const char* status = ready ? "ready" : draining_ ? "draining" : "loading";
      return channel->Respond(JsonResponse(ready ? 200 : 503, {{"status", status}}));
    }
    case RouteId::kKvEvents:
      if (options_.kv_events == nullptr) {
        return SendError(
            *channel,
            Simple(404, "invalid_request_error", "This server does not publish KV events."), "");
      }
      return options_.kv_events->Subscribe(channel);
    case RouteId::kReplicaInfo: {
      json info = options_.kv_events != nullptr
                      ? options_.kv_events->Info()
                      : json{{"labels", json::object()}, {"kv_events", false}};
      info.update(options_.pd != nullptr ? options_.pd->Info()
                                         : json{{"role", "both"}, {"kv_address", nullptr}});
      return channel->Respond(JsonResponse(200, info));
    }
    case RouteId::kMetrics: {
      HttpResponse r;
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = metrics_->Render(backend_->Metrics(), backend_->Ready() && !draining_);
      if (options_.pd != nullptr) r.body += options_.pd->MetricsText();
      return channel->Respond(std::move(r));
    }
  }
}

void OpenAiApi::Models(const std::string& id, ResponseChannel& channel) {
  auto model_json = [&](const std::string& name) {
    return json{{"id", name},
                {"object", "model"},
                {"created", created_},
                {"owned_by", "tachyon"},
                {"max_model_len", backend_->Info().context_length}};
  };
  if (!id.empty()) {
    for (const auto& name : options_.served_model_names) {
      if (name == id) return channel.Respond(JsonResponse(200, model_json(name)));
    }
    ApiError e = Simple(404, "invalid_request_error", "The model '" + id + "' does not exist.");
    e.code = "model_not_found";
    return SendError(channel, e, "");
  }
  json data = json::array();
  for (const auto& name : options_.served_model_names) data.push_back(model_json(name));
  channel.Respond(JsonResponse(200, {{"object", "list"}, {"data", std::move(data)}}));
}

std::optional<ApiError> OpenAiApi::CheckCommon(const CommonParams& common) const {
  const int max_n = backend_->Info().max_live_sequences;
  if (max_n > 0 && common.n > max_n) {
    return InvalidParam("n", "n = " + std::to_string(common.n) + " exceeds the " +
                                 std::to_string(max_n) + " sequences this server holds at once.");
  }
  return CheckModel(common.model);
}

std::optional<ApiError> OpenAiApi::CheckModel(const std::string& model) const {
  if (model.empty()) return std::nullopt;
  for (const auto& name : options_.served_model_names) {
    if (name == model) return std::nullopt;
  }
  ApiError e = Simple(404, "invalid_request_error",
                      "The model '" + model + "' does not exist. This server serves '" +
                          options_.served_model_names.front() + "'.");
  e.param = "model";
  e.code = "model_not_found";
  return e;
}

std::optional<ApiError> OpenAiApi::FitContext(const CommonParams& common, size_t prompt_len,
                                              sampling::SamplingParams& sampling,
                                              const char* param) const {
  const int64_t ctx = backend_->Info().context_length;
  const int64_t p = static_cast<int64_t>(prompt_len);
  if (p + (common.max_tokens_set ? common.sampling.max_tokens : 1) > ctx) {
    ApiError e = InvalidParam(
        param, "This model's maximum context length is " + std::to_string(ctx) +
                   " tokens. However, you requested " +
                   std::to_string(p + (common.max_tokens_set ? common.sampling.max_tokens : 1)) +
                   " tokens (" + std::to_string(p) + " in the prompt, " +
                   std::to_string(common.max_tokens_set ? common.sampling.max_tokens : 1) +
                   " for the completion). Please reduce the prompt or the completion length.");
    e.code = "context_length_exceeded";
    return e;
  }
  if (!common.max_tokens_set) {
    const int room = static_cast<int>(ctx - p);
    if (sampling.min_tokens > room) {
      return InvalidParam("min_tokens", "min_tokens = " + std::to_string(sampling.min_tokens) +
                                            " does not fit the context: the prompt leaves room "
                                            "for " +
                                            std::to_string(room) + " tokens.");
    }
    sampling.max_tokens = room;
    const int default_max = options_.sampling_defaults.max_tokens;
    if (default_max > 0) {
      // A continuation's default counts the tokens it resumes, as the original stream's did.
      const int left = default_max - sampling.output_offset;
      if (left <= 0) {
        return InvalidParam("resume_token_ids",
                            "resumes " + std::to_string(sampling.output_offset) +
                                " tokens, which leaves nothing of the default max_tokens = " +
                                std::to_string(default_max) + ".");
      }
      sampling.max_tokens = std::min(room, std::max(left, sampling.min_tokens));
    }
  }
  return std::nullopt;
}

std::optional<ApiError> OpenAiApi::FitGrammar(const grammar::CompiledGrammar* g, bool within,
                                              const sampling::SamplingParams& sampling) const {
  if (g == nullptr || !within) return std::nullopt;
  const int64_t max_tokens = int64_t{sampling.max_tokens} + sampling.output_offset;
  const int64_t need = g->MinTokenLimit();
  if (max_tokens >= need) return std::nullopt;
  if (need == grammar::CompiledGrammar::kNoTokenLimit) {
    return InvalidParam("max_tokens",
                        "complete_within_max_tokens cannot be promised for this constraint at "
                        "any max_tokens (its shortest output needs a byte that no single token "
                        "spells); turn complete_within_max_tokens off.");
  }
  return InvalidParam("max_tokens",
                      "max_tokens = " + std::to_string(max_tokens) +
                          " is too small for complete_within_max_tokens: the shortest output "
                          "this constraint accepts may take up to " +
                          std::to_string(need) + " tokens. Raise max_tokens to at least " +
                          std::to_string(need) + " or turn complete_within_max_tokens off.");
}

bool OpenAiApi::WithinMaxTokens(const std::optional<RequestedConstraint>& constraint) const {
  if (constraint && constraint->complete_within_max_tokens) {
    return *constraint->complete_within_max_tokens;
  }
  return options_.complete_within_max_tokens;
}

ApiResult<std::shared_ptr<const grammar::CompiledGrammar>> OpenAiApi::CompileConstraint(
    const std::optional<RequestedConstraint>& constraint) const {
  using Grammar = std::shared_ptr<const grammar::CompiledGrammar>;
  if (!constraint) return Grammar();
  auto compiled = backend_->CompileConstraint(constraint->spec);
  if (compiled.ok()) return Grammar(std::move(*compiled));
  ApiError e = ApiErrorFromStatus(compiled.status());
  if (e.http_status == 400) {
    e.param = constraint->param;
    e.message = "Invalid value for '" + constraint->param + "': " + e.message;
  }
  return e;
}

void OpenAiApi::Completions(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel) {
  auto body = ParseOrderedJsonBody(req.body);
  if (!body.ok()) return SendError(*channel, body.error(), kCompletions);
  auto parsed =
      ParseCompletionRequest(body.value(), backend_->Info().vocab_size, options_.sampling_defaults);
  if (!parsed.ok()) return SendError(*channel, parsed.error(), kCompletions);
  CompletionRequest& cr = parsed.value();
  if (auto e = CheckCommon(cr.common)) return SendError(*channel, *e, kCompletions);
  if (draining_) {
    return SendError(*channel, ApiErrorFromStatus(Unavailable("The server is shutting down.")),
                     kCompletions);
  }
  auto grammar = CompileConstraint(cr.common.constraint);
  if (!grammar.ok()) return SendError(*channel, grammar.error(), kCompletions);
  JobSpec spec;
  spec.grammar = std::move(grammar.value());
  spec.grammar_within_max_tokens = WithinMaxTokens(cr.common.constraint);
  for (PromptInput& input : cr.prompts) {
    JobPrompt prompt;
    prompt.sampling = cr.common.sampling;
    if (auto* text = std::get_if<std::string>(&input)) {
      auto ids = backend_->Tokenize(*text, /*add_special=*/true);
      if (!ids.ok()) return SendError(*channel, ApiErrorFromStatus(ids.status()), kCompletions);
      prompt.ids = std::move(*ids);
      prompt.echo_text = std::move(*text);
    } else {
      prompt.ids = std::move(std::get<std::vector<int32_t>>(input));
      if (cr.echo) {
        auto text = backend_->Detokenize(prompt.ids);
        if (!text.ok()) return SendError(*channel, ApiErrorFromStatus(text.status()), kCompletions);
        prompt.echo_text = std::move(*text);
      }
    }
    prompt.ids.insert(prompt.ids.end(), cr.common.resume_token_ids.begin(),
                      cr.common.resume_token_ids.end());
    if (auto e = FitContext(cr.common, prompt.ids.size(), prompt.sampling, "prompt")) {
      return SendError(*channel, *e, kCompletions);
    }
    if (auto e = FitGrammar(spec.grammar.get(), spec.grammar_within_max_tokens, prompt.sampling)) {
      return SendError(*channel, *e, kCompletions);
    }
    spec.prompts.push_back(std::move(prompt));
  }
  spec.chat = false;
  spec.id = NewId("cmpl");
  spec.model = cr.common.model.empty() ? model_name() : cr.common.model;
  spec.endpoint = kCompletions;
  spec.created = UnixNow();
  spec.stream = cr.common.stream;
  spec.include_usage = cr.common.include_usage;
  spec.return_token_ids = cr.common.return_token_ids;
  spec.echo = cr.echo;
  spec.n = cr.common.n;
  spec.priority = cr.common.priority;
  spec.cache_salt = cr.common.cache_salt;
  spec.kv_transfer = cr.common.kv_transfer;
  spec.arrival = std::chrono::steady_clock::now();
  GenerationJob::Start(std::move(spec), {backend_, metrics_, jobs_}, std::move(channel));
}

void OpenAiApi::ChatCompletions(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel) {
  auto body = ParseOrderedJsonBody(req.body);
  if (!body.ok()) return SendError(*channel, body.error(), kChat);
  if (auto e = StartChat(body.value(), kChat, "chatcmpl", nullptr, channel)) {
    SendError(*channel, *e, kChat);
  }
}

std::optional<ApiError> OpenAiApi::StartChat(const nlohmann::ordered_json& body,
                                             const char* endpoint, const char* id_prefix,
                                             std::shared_ptr<ChatOutputAdapter> adapter,
                                             std::shared_ptr<ResponseChannel> channel) {
  auto parsed = ParseChatRequest(body, backend_->Info().vocab_size, options_.sampling_defaults);
  if (!parsed.ok()) return parsed.error();
  ChatRequest& cr = parsed.value();
  if (auto e = CheckCommon(cr.common)) return e;
  if (!backend_->Info().has_chat_template) {
    return InvalidParam("messages",
                        "This model has no chat template; start the server "
                        "with --chat-template FILE or use /v1/completions.");
  }
  if (draining_) return ApiErrorFromStatus(Unavailable("The server is shutting down."));
  auto grammar = CompileConstraint(cr.common.constraint);
  if (!grammar.ok()) return grammar.error();
  // Tools: tool_choice "required" or a named function makes the reply tool calls, "auto" lets
  // the model open one (server/chat_constraints.h).
  const ToolCallFormat format = options_.tool_call_format;
  const bool has_tools = !cr.tool_names.empty();
  const auto mode = cr.tool_choice.mode;
  if (has_tools && (mode == ToolChoice::Mode::kRequired || mode == ToolChoice::Mode::kFunction) &&
      format == ToolCallFormat::kNone) {
    return InvalidParam("tool_choice",
                        "tool_choice 'required' or a named function needs a tool-call "
                        "format; this model's chat template shows none (start the "
                        "server with --tool-call-parser hermes|llama3|mistral).");
  }
  // The constraint's own grammar (a reasoning section or a tool trigger may wrap it below).
  const std::shared_ptr<const grammar::CompiledGrammar> constraint_grammar = grammar.value();
  auto plan = PlanChatConstraints({&cr, std::move(grammar.value()), format, options_.reasoning_end},
                                  *backend_, triggers_);
  if (!plan.ok()) return plan.error();
  const std::string& forced = plan.value().prompt_suffix;
  // Content from the request is tokenized as plain text (no forged control tokens).
  auto ids = backend_->TokenizeChat(cr.template_context, forced, /*add_special=*/false);
  if (!ids.ok()) {
    ApiError e = ApiErrorFromStatus(ids.status());
    if (e.http_status == 400) e.param = "messages";
    return e;
  }
  JobPrompt prompt;
  prompt.sampling = cr.common.sampling;
  prompt.ids = std::move(*ids);
  prompt.ids.insert(prompt.ids.end(), cr.common.resume_token_ids.begin(),
                    cr.common.resume_token_ids.end());
  if (auto e = FitContext(cr.common, prompt.ids.size(), prompt.sampling, "messages")) return e;
  if (auto e = FitGrammar(constraint_grammar.get(), WithinMaxTokens(cr.common.constraint),
                          prompt.sampling)) {
    return e;
  }
  JobSpec spec;
  spec.grammar = plan.value().grammar;
  spec.grammar_within_max_tokens = WithinMaxTokens(cr.common.constraint);
  spec.prompts.push_back(std::move(prompt));
  spec.chat = true;
  spec.id = NewId(id_prefix);
  spec.model = cr.common.model.empty() ? model_name() : cr.common.model;
  spec.endpoint = endpoint;
  spec.created = UnixNow();
  spec.stream = cr.common.stream;
  spec.include_usage = cr.common.include_usage || adapter != nullptr;
  spec.return_token_ids = cr.common.return_token_ids;
  spec.n = cr.common.n;
  spec.priority = cr.common.priority;
  spec.cache_salt = cr.common.cache_salt;
  spec.kv_transfer = cr.common.kv_transfer;
  spec.arrival = std::chrono::steady_clock::now();
  if (has_tools && mode != ToolChoice::Mode::kNone) {
    spec.tool_format = format;
    spec.tool_prefix = forced;
    spec.max_tool_calls = cr.parallel_tool_calls ? 0 : 1;
    spec.tool_grammar = plan.value().tool_grammar;
    spec.tool_trigger = plan.value().tool_trigger;
  }
  spec.reasoning_end = plan.value().reasoning_end;
  spec.adapter = std::move(adapter);
  GenerationJob::Start(std::move(spec), {backend_, metrics_, jobs_}, std::move(channel));
  return std::nullopt;
}

void OpenAiApi::Responses(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel) {
  auto body = ParseOrderedJsonBody(req.body);
  if (!body.ok()) return SendError(*channel, body.error(), kResponsesPath);
  auto parsed = ParseResponsesRequest(body.value(), responses_);
  if (!parsed.ok()) return SendError(*channel, parsed.error(), kResponsesPath);
  ordered_json chat = std::move(parsed.value().chat_body);
  auto adapter = std::make_shared<ResponsesAdapter>(std::move(parsed.value()), &responses_);
  if (auto e = StartChat(chat, kResponsesPath, "resp", std::move(adapter), channel)) {
    ToResponsesParam(*e);
    SendError(*channel, *e, kResponsesPath);
  }
}

void OpenAiApi::Messages(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel) {
  auto body = ParseOrderedJsonBody(req.body);
  if (!body.ok()) return SendError(*channel, body.error(), kMessagesPath);
  auto chat = ParseMessagesRequest(body.value());
  if (!chat.ok()) return SendError(*channel, chat.error(), kMessagesPath);
  if (auto e = StartChat(chat.value(), kMessagesPath, "msg", std::make_shared<AnthropicAdapter>(),
                         channel)) {
    ToMessagesParam(*e);
    SendError(*channel, *e, kMessagesPath);
  }
}

void OpenAiApi::CountTokens(const HttpRequest& req, ResponseChannel& channel) {
  auto body = ParseOrderedJsonBody(req.body);
  if (!body.ok()) return SendError(channel, body.error(), kCountTokensPath);
  auto chat = ParseMessagesRequest(body.value(), /*count_tokens=*/true);
  if (!chat.ok()) return SendError(channel, chat.error(), kCountTokensPath);
  auto parsed = ParseChatRequest(chat.value(), backend_->Info().vocab_size);
  if (!parsed.ok()) return SendError(channel, parsed.error(), kCountTokensPath);
  if (auto e = CheckModel(parsed.value().common.model)) {
    return SendError(channel, *e, kCountTokensPath);
  }
  if (!backend_->Info().has_chat_template) {
    return SendError(channel,
                     InvalidParam("messages",
                                  "This model has no chat template; start the "
                                  "server with --chat-template FILE."),
                     kCountTokensPath);
  }
  // The ids a /v1/messages request with these messages, system and tools is prompted with.
  auto ids = backend_->TokenizeChat(parsed.value().template_context, "", /*add_special=*/false);
  if (!ids.ok()) {
    ApiError e = ApiErrorFromStatus(ids.status());
    if (e.http_status == 400) e.param = "messages";
    return SendError(channel, e, kCountTokensPath);
  }
  metrics_->CountRequest(kCountTokensPath, 200);
  channel.Respond(JsonResponse(200, {{"input_tokens", ids->size()}}));
}

void OpenAiApi::ChatPage(ResponseChannel& channel) {
  // The page talks to /v1/chat/completions: only a server that can chat has it.
  if (!backend_->Info().has_chat_template) {
    return SendError(channel,
                     Simple(404, "invalid_request_error",
                            "No chat page: this model has no chat template (start the server "
                            "with --chat-template FILE)."),
                     "");
  }
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::string(ChatPageHtml());
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'none'; script-src 'unsafe-inline'; style-src "
                         "'unsafe-inline'; connect-src 'self'; img-src 'self' data:; "
                         "base-uri 'none'; form-action 'none'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  channel.Respond(std::move(r));
}

void OpenAiApi::Tokenize(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel) {
  auto body = ParseJsonBody(req.body);
  if (!body.ok()) return SendError(*channel, body.error(), "/tokenize");
  const json& b = body.value();
  std::string text;
  std::optional<std::vector<int32_t>> chat_ids;
  bool add_special = true;
  if (auto it = b.find("add_special_tokens"); it != b.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return SendError(*channel, InvalidParam("add_special_tokens", "expected a boolean."),
                       "/tokenize");
    }
    add_special = it->get<bool>();
  }
  auto prompt = b.find("prompt");
  const bool has_prompt = prompt != b.end() && !prompt->is_null();
  if (has_prompt && !prompt->is_string()) {
    return SendError(*channel, InvalidParam("prompt", "'prompt' must be a string."), "/tokenize");
  }
  auto messages = b.find("messages");
  if (messages != b.end() && !messages->is_null()) {
    auto ordered = ParseOrderedJsonBody(req.body);
    if (!ordered.ok()) return SendError(*channel, ordered.error(), "/tokenize");
    auto chat = ParseChatRequest(ordered.value(), backend_->Info().vocab_size);
    if (!chat.ok()) return SendError(*channel, chat.error(), "/tokenize");
    auto special = b.find("add_special_tokens");
    if (special == b.end() || special->is_null()) add_special = false;
    // The same ids a chat completion of these messages would get.
    auto rendered = backend_->TokenizeChat(chat.value().template_context, "", add_special);
    if (!rendered.ok()) {
      return SendError(*channel, ApiErrorFromStatus(rendered.status()), "/tokenize");
    }
    chat_ids = std::move(*rendered);
  } else if (has_prompt) {
    text = prompt->get<std::string>();
  } else {
    return SendError(*channel,
                     InvalidParam("prompt",
                                  "'prompt' (a string) or 'messages' is "
                                  "required."),
                     "/tokenize");
  }
  auto ids = chat_ids ? Result<std::vector<int32_t>>(std::move(*chat_ids))
                      : backend_->Tokenize(text, add_special);
  if (!ids.ok()) return SendError(*channel, ApiErrorFromStatus(ids.status()), "/tokenize");
  metrics_->CountRequest("/tokenize", 200);
  channel->Respond(JsonResponse(200, {{"tokens", *ids},
                                      {"count", ids->size()},
                                      {"max_model_len", backend_->Info().context_length}}));
}

void OpenAiApi::Detokenize(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel) {
  auto body = ParseJsonBody(req.body);
  if (!body.ok()) return SendError(*channel, body.error(), "/detokenize");
  const json& b = body.value();
  auto it = b.find("tokens");
  std::vector<int32_t> ids;
  bool valid = it != b.end() && it->is_array();
  if (valid) {
    for (const auto& t : *it) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() >= backend_->Info().vocab_size) {
        valid = false;
        break;
      }
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
  }
  if (!valid) {
    return SendError(*channel,
                     InvalidParam("tokens", "'tokens' must be an array of token ids in [0, " +
                                                std::to_string(backend_->Info().vocab_size) + ")."),
                     "/detokenize");
  }
  auto text = backend_->Detokenize(ids);
  if (!text.ok()) return SendError(*channel, ApiErrorFromStatus(text.status()), "/detokenize");
  metrics_->CountRequest("/detokenize", 200);
  channel->Respond(JsonResponse(200, {{"prompt", *text}}));
}

}  // namespace tachyon::server
