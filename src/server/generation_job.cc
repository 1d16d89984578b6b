#include "server/generation_job.h"

#include <cmath>
#include <optional>

#include "server/sse.h"
#include "util/logging.h"

namespace tachyon::server {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

json BytesArray(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

// A non-streamed answer is held whole until it is sent, and its logprobs are most of it (~600
// bytes per entry: a token and each of its top alternatives, over every choice). Past this
// many entries at most (max_tokens, and the prompt when it is echoed), the request must stream.
constexpr int64_t kMaxHeldLogprobs = int64_t{1} << 20;

std::optional<ApiError> HeldLogprobsError(const JobSpec& s) {
  if (s.stream) return std::nullopt;
  int64_t entries = 0;
  for (const JobPrompt& p : s.prompts) {
    if (p.sampling.logprobs < 0) continue;
    const int64_t tokens =
        p.sampling.max_tokens + (p.echo_text.empty() ? 0 : static_cast<int64_t>(p.ids.size()));
    entries += int64_t{s.n} * tokens * (p.sampling.logprobs + 1);
  }
  if (entries <= kMaxHeldLogprobs) return std::nullopt;
  return InvalidParam("logprobs", "This request could return " + std::to_string(entries) +
                                      " logprobs (choices x tokens x alternatives); a response "
                                      "that is not streamed holds at most " +
                                      std::to_string(kMaxHeldLogprobs) +
                                      ". Stream it, or lower n, max_tokens or the logprobs.");
}

}  // namespace

uint64_t JobRegistry::Add(std::weak_ptr<GenerationJob> job) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t key = next_key_++;
  jobs_[key] = std::move(job);
  return key;
}

void JobRegistry::Remove(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.erase(key);
}

size_t JobRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

void JobRegistry::CancelAll() {
  std::vector<std::shared_ptr<GenerationJob>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, weak] : jobs_) {
      if (auto job = weak.lock()) live.push_back(std::move(job));
    }
  }
  for (auto& job : live) job->Cancel();
}

GenerationJob::GenerationJob(JobSpec spec, JobContext ctx, std::shared_ptr<ResponseChannel> channel)
    : spec_(std::move(spec)), ctx_(ctx), channel_(std::move(channel)) {
  for (size_t p = 0; p < spec_.prompts.size(); ++p) {
    for (int k = 0; k < spec_.n; ++k) {
      Choice c;
      c.prompt_index = static_cast<int>(p);
      if (!spec_.reasoning_end.empty()) {
        c.reasoning = std::make_unique<ReasoningSplit>(spec_.reasoning_end);
      }
      if (spec_.tool_grammar) {
        c.stream = std::make_unique<ToolCallStream>(spec_.tool_trigger, spec_.max_tool_calls);
      } else if (spec_.tool_format != ToolCallFormat::kNone) {
        c.tools = std::make_unique<ToolCallParser>(spec_.tool_format, spec_.max_tool_calls);
        // The forced start of a call is part of the reply the parser reads (never content).
        c.text += c.tools->Push(spec_.tool_prefix).content;
      }
      choices_.push_back(std::move(c));
    }
  }
}

GenerationJob::~GenerationJob() {
  if (registry_key_ != 0) ctx_.registry->Remove(registry_key_);
}

void GenerationJob::Start(JobSpec spec, JobContext ctx, std::shared_ptr<ResponseChannel> channel) {
  auto job = std::make_shared<GenerationJob>(std::move(spec), ctx, channel);
  if (job->spec_.adapter) job->spec_.adapter->Begin(job->spec_);
  job->registry_key_ = ctx.registry->Add(job);
  if (auto e = HeldLogprobsError(job->spec_)) return job->Fail(*e);
  std::weak_ptr<GenerationJob> weak = job;
  channel->SetOnClose([weak] {
    if (auto j = weak.lock()) j->OnClientGone();
  });
  // One backend request per prompt; its n choices share the prompt's KV blocks.
  for (size_t p = 0; p < job->spec_.prompts.size(); ++p) {
    const JobSpec& s = job->spec_;
    const JobPrompt& prompt = s.prompts[p];
    GenerationRequest req;
    req.request_id = s.id + "-" + std::to_string(p);
    req.engine.prompt_tokens = prompt.ids;
    req.engine.params = prompt.sampling;
    req.engine.params.n = s.n;
    req.engine.priority = s.priority;
    req.engine.cache_salt = s.cache_salt;
    req.kv_transfer = s.kv_transfer;
    req.engine.grammar = s.grammar;
    req.engine.grammar_within_max_tokens = s.grammar_within_max_tokens;
    const size_t first_choice = p * static_cast<size_t>(s.n);
    auto handle =
        ctx.backend->Submit(std::move(req), [job, first_choice](engine::RequestOutput chunk) {
          const size_t index = first_choice + static_cast<size_t>(chunk.index);
          job->OnChunk(index, std::move(chunk));
        });
    if (!handle.ok()) {
      job->Cancel();
      job->Fail(ApiErrorFromStatus(handle.status()));
      return;
    }
    std::lock_guard<std::mutex> lock(job->mu_);
    job->handles_.push_back(*handle);
    if (job->cancelled_) ctx.backend->Cancel(*handle);
  }
  // Chunks queued during submission are drained later on this executor, after the head.
  if (!job->spec_.stream) return;
  channel->StartStream({});
  job->stream_started_ = true;
  if (job->spec_.chat) {
    for (size_t i = 0; i < job->choices_.size(); ++i) {
      job->WriteEvent(job->StreamDelta(i, "", nullptr));
    }
  }
}

void JobRegistry::DrainAll() {
  std::vector<std::shared_ptr<GenerationJob>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, weak] : jobs_) {
      if (auto job = weak.lock()) live.push_back(std::move(job));
    }
  }
  for (auto& job : live) job->CancelForDrain();
}

void GenerationJob::CancelForDrain() {
  draining_ = true;
  Cancel();
}

void GenerationJob::Cancel() {
  std::vector<uint64_t> handles;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    handles = handles_;
  }
  for (uint64_t h : handles) ctx_.backend->Cancel(h);
}

void GenerationJob::OnChunk(size_t choice, engine::RequestOutput chunk) {
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({choice, std::move(chunk), Clock::now()});
    post = !drain_scheduled_;
    drain_scheduled_ = true;
  }
  if (post) channel_->Post([self = shared_from_this()] { self->Drain(); });
}

void GenerationJob::Drain() {
  std::deque<Queued> items;
  {
    std::lock_guard<std::mutex> lock(mu_);
    items.swap(queue_);
    drain_scheduled_ = false;
  }
  try {
    for (Queued& q : items) Handle(q.index, q.chunk, q.arrived);
  } catch (const std::exception& e) {
    // Last resort (a bug, e.g. in a tokenizer call): the request ends with a 500 and the
    // backend stops generating for it; the io thread is unaffected.
    TLOG(ERROR) << spec_.id << ": internal error while streaming: " << e.what();
    Cancel();
    ApiError err;
    err.http_status = 500;
    err.type = "server_error";
    err.message = "Internal error while producing the response.";
    Fail(err);
  }
}

namespace {

// A call's head delta (id, type and name, empty arguments), as OpenAI streams it first.
json ToolCallHead(int call_index, const ToolCall& call) {
  return {{"index", call_index},
          {"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", ""}}}};
}

json ToolCallArguments(int call_index, const std::string& arguments) {
  return {{"index", call_index}, {"function", {{"arguments", arguments}}}};
}

json ToolDeltaJson(const ToolCallDelta& d) {
  json call = ToolCallArguments(d.index, d.arguments);
  if (d.start) {
    call["id"] = d.id;
    call["type"] = "function";
    call["function"]["name"] = d.name;
  }
  return call;
}

// Appends a tool_calls delta entry, merged into the last one when it continues the same call.
void AppendToolEntry(json& entries, json entry) {
  if (!entries.empty() && entries.back()["index"] == entry["index"]) {
    json& last = entries.back();
    for (const char* key : {"id", "type"}) {
      if (entry.contains(key)) last[key] = entry[key];
    }
    if (entry["function"].contains("name")) last["function"]["name"] = entry["function"]["name"];
    last["function"]["arguments"] = last["function"].value("arguments", std::string()) +
                                    entry["function"]["arguments"].get<std::string>();
    return;
  }
  entries.push_back(std::move(entry));
}

}  // namespace

void GenerationJob::Handle(size_t index, engine::RequestOutput& chunk, Clock::time_point now) {
  if (index >= choices_.size()) return;  // a backend bug; never index out of range
  Choice& c = choices_[index];
  if (c.finished) return;
  if (!chunk.resumed_text.empty()) {
    // A continuation: the text the original stream sent for the tokens it resumes goes through
    // the choice's reasoning split and tool-call parser unsent, so that they go on from where
    // the original's were (a call the original completed counts, one it began goes on).
    std::string text = std::move(chunk.resumed_text);
    if (c.reasoning) text = c.reasoning->Push(text).answer;
    if (c.stream) {
      c.stream->Push(text);
      c.num_calls = static_cast<int>(c.stream->calls().size());
    } else if (c.tools) {
      c.num_calls += static_cast<int>(c.tools->Push(text).calls.size());
    }
  }
  if (!chunk.token_ids.empty() && !c.has_first_token) {
    c.has_first_token = true;
    c.first_token = now;
    if (engine_ttft_.first_token_seconds < 0) engine_ttft_ = chunk.ttft;
  }
  c.completion_tokens += static_cast<int>(chunk.token_ids.size());
  const bool failed = chunk.finish_reason == engine::FinishReason::kError || !chunk.error.ok();
  if (chunk.finish_reason != engine::FinishReason::kNone || failed) {
    c.finished = true;
    c.reason = chunk.finish_reason;
    c.cached_tokens = static_cast<int>(chunk.usage.cached_prompt_tokens);
    finished_++;
    double ttft = c.has_first_token ? Seconds(c.first_token - spec_.arrival) : -1;
    double tpot =
        c.completion_tokens > 1 ? Seconds(now - c.first_token) / (c.completion_tokens - 1) : -1;
    ctx_.metrics->ObserveGeneration(ttft, tpot, Seconds(now - spec_.arrival), chunk.queue_seconds);
    if (chunk.queue_seconds >= 0) queue_seconds_ = chunk.queue_seconds;
    last_finish_ = now;
  }
  if (done_) return;
  // A router's stream (it asks for token ids to resume from) gets the drain marker; other
  // clients see finish_reason "abort".
  if (draining_ && chunk.finish_reason == engine::FinishReason::kAbort && spec_.stream &&
      spec_.return_token_ids && !spec_.adapter) {
    ApiError e;
    e.http_status = 503;
    e.type = "service_unavailable";
    e.code = "replica_draining";
    e.message = "The server shut down before the request finished; resume it on another replica.";
    e.retry_after_s = 1;
    Fail(e);
    return;
  }
  if (failed) {
    Cancel();
    Fail(ApiErrorFromStatus(chunk.error.ok() ? Internal("the model failed") : chunk.error));
    return;
  }
  json logprobs = chunk.logprobs.empty() ? json(nullptr) : LogprobsJson(c, chunk);
  std::string reasoning;
  if (c.reasoning) {
    ReasoningSplit::Output out = c.reasoning->Push(chunk.text);
    if (c.finished) {
      ReasoningSplit::Output rest = c.reasoning->Finish();
      out.reasoning += rest.reasoning;
      out.answer += rest.answer;
    }
    reasoning = std::move(out.reasoning);
    chunk.text = std::move(out.answer);
  }
  std::vector<ToolCall> calls;
  std::vector<ToolCallDelta> deltas;
  if (c.stream) {
    ToolCallStream::Output out = c.stream->Push(chunk.text);
    if (c.finished) out.content += c.stream->Finish().content;
    chunk.text = std::move(out.content);
    deltas = std::move(out.deltas);
    c.num_calls = static_cast<int>(c.stream->calls().size());
  } else if (c.tools) {
    ToolCallParser::Output out = c.tools->Push(chunk.text);
    if (c.finished) {
      ToolCallParser::Output rest = c.tools->Finish();
      out.content += rest.content;
      for (ToolCall& call : rest.calls) out.calls.push_back(std::move(call));
    }
    chunk.text = std::move(out.content);
    calls = std::move(out.calls);
  }
  if (spec_.stream) {
    std::string text = std::move(chunk.text);
    c.text_bytes += text.size();
    if (spec_.echo && !c.echo_sent && (!text.empty() || c.finished)) {
      c.echo_sent = true;
      text = spec_.prompts[c.prompt_index].echo_text + text;
    }
    const bool ids = spec_.return_token_ids && !chunk.token_ids.empty();
    if (spec_.return_token_ids && spec_.chat && !spec_.adapter) {
      // A resumable stream (a router's): one event per engine output, carrying its token ids
      // beside all of its text (reasoning, content, tool-call deltas), so that a stream cut
      // between events never leaves text sent whose tokens the router did not see, nor tokens
      // seen whose text was not sent.
      json event = StreamDelta(index, text, logprobs, ids ? &chunk.token_ids : nullptr);
      json& delta = event["choices"][0]["delta"];
      if (!ids && text.empty() && logprobs.is_null()) delta = {{"content", ""}};
      if (!reasoning.empty()) delta["reasoning_content"] = std::move(reasoning);
      json entries = json::array();
      for (const ToolCall& call : calls) {
        AppendToolEntry(entries, ToolCallHead(c.num_calls, call));
        AppendToolEntry(entries, ToolCallArguments(c.num_calls++, call.arguments));
      }
      if (c.stream) {
        for (const ToolCallDelta& d : deltas) AppendToolEntry(entries, ToolDeltaJson(d));
      }
      const bool has_calls = !entries.empty();
      if (has_calls) delta["tool_calls"] = std::move(entries);
      if (ids || !text.empty() || !logprobs.is_null() || delta.contains("reasoning_content") ||
          has_calls) {
        WriteEvent(event);
      }
    } else {
      if (!reasoning.empty()) {
        json event = StreamDelta(index, "", nullptr);
        event["choices"][0]["delta"] = {{"reasoning_content", std::move(reasoning)}};
        WriteEvent(event);
      }
      if (!text.empty() || !logprobs.is_null() || ids) {
        WriteEvent(StreamDelta(index, text, logprobs, ids ? &chunk.token_ids : nullptr));
      }
      for (const ToolCall& call : calls) WriteToolCall(index, c.num_calls++, call);
      if (c.stream && !spec_.adapter) {
        for (const ToolCallDelta& d : deltas) WriteToolDelta(index, d);
      }
    }
    if (c.stream && spec_.adapter && c.finished) {
      for (size_t k = 0; k < c.stream->calls().size(); ++k) {
        WriteToolCall(index, static_cast<int>(k), c.stream->calls()[k]);
      }
    }
    if (c.finished && !done_) {
      json event = StreamDelta(index, "", nullptr);
      event["choices"][0]["finish_reason"] = FinishName(c);
      if (spec_.chat) event["choices"][0]["delta"] = json::object();
      WriteEvent(event);
    }
  } else {
    c.text += chunk.text;
    c.text_bytes += chunk.text.size();
    c.reasoning_text += reasoning;
    if (c.stream) {
      if (c.finished) c.calls = c.stream->calls();
    } else {
      c.num_calls += static_cast<int>(calls.size());
      for (ToolCall& call : calls) c.calls.push_back(std::move(call));
    }
    if (!logprobs.is_null()) {
      auto& dst = c.logprobs;
      if (spec_.chat) {
        for (auto& e : logprobs["content"]) dst.push_back(std::move(e));
      } else {
        if (dst.empty())
          dst = json{{"tokens", json::array()},
                     {"token_logprobs", json::array()},
                     {"top_logprobs", json::array()},
                     {"text_offset", json::array()}};
        for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
          for (auto& e : logprobs[key]) dst[key].push_back(std::move(e));
        }
      }
    }
  }
  if (finished_ == choices_.size() && !done_) Complete();
}

json GenerationJob::LogprobsJson(Choice& c, const engine::RequestOutput& chunk) const {
  const GenerationBackend& b = *ctx_.backend;
  if (spec_.chat) {
    json content = json::array();
    for (const engine::TokenLogprobs& lp : chunk.logprobs) {
      std::string tok = b.TokenBytes(lp.token);
      json top = json::array();
      for (const sampling::TokenLogprob& t : lp.top) {
        std::string s = b.TokenBytes(t.token);
        top.push_back({{"token", s}, {"logprob", t.logprob}, {"bytes", BytesArray(s)}});
      }
      content.push_back({{"token", tok},
                         {"logprob", lp.logprob},
                         {"bytes", BytesArray(tok)},
                         {"top_logprobs", std::move(top)}});
    }
    return json{{"content", std::move(content)}, {"refusal", nullptr}};
  }
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  size_t offset = c.text_bytes;
  if (spec_.echo) offset += spec_.prompts[c.prompt_index].echo_text.size();
  for (const engine::TokenLogprobs& lp : chunk.logprobs) {
    std::string tok = b.TokenBytes(lp.token);
    out["tokens"].push_back(tok);
    out["token_logprobs"].push_back(lp.logprob);
    json top = json::object();
    for (const sampling::TokenLogprob& t : lp.top) top[b.TokenBytes(t.token)] = t.logprob;
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(offset);
    offset += tok.size();
  }
  return out;
}

namespace {

json ToolCallJson(const ToolCall& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

}  // namespace

std::string_view GenerationJob::FinishName(const Choice& c) const {
  // A call under a tool grammar cut by max_tokens is incomplete: "length".
  const bool cut = c.stream && c.reason == engine::FinishReason::kLength;
  if (c.num_calls > 0 && c.reason != engine::FinishReason::kAbort && !cut) return "tool_calls";
  return engine::FinishReasonName(c.reason);
}


void GenerationJob::WriteToolCall(size_t index, int call_index, const ToolCall& call) {
  // As OpenAI streams them: id, type and name first (empty arguments), then the arguments.
  json head = StreamDelta(index, "", nullptr);
  head["choices"][0]["delta"] = {{"tool_calls", json::array({ToolCallHead(call_index, call)})}};
  WriteEvent(head);
  json args = StreamDelta(index, "", nullptr);
  args["choices"][0]["delta"] = {
      {"tool_calls", json::array({ToolCallArguments(call_index, call.arguments)})}};
  WriteEvent(args);
}

void GenerationJob::WriteToolDelta(size_t index, const ToolCallDelta& d) {
  json event = StreamDelta(index, "", nullptr);
  event["choices"][0]["delta"] = {{"tool_calls", json::array({ToolDeltaJson(d)})}};
  WriteEvent(event);
}

json GenerationJob::ChunkEnvelope() const {
  json j = {{"id", spec_.id},
            {"object", spec_.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", spec_.created},
            {"model", spec_.model},
            {"system_fingerprint", nullptr}};
  if (spec_.include_usage) j["usage"] = nullptr;
  return j;
}

json GenerationJob::StreamDelta(size_t index, const std::string& text, const json& logprobs,
                                const std::vector<int32_t>* token_ids) const {
  json choice = {{"index", index}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
  if (token_ids) choice["token_ids"] = *token_ids;
  if (spec_.chat) {
    bool first = text.empty() && logprobs.is_null() && token_ids == nullptr;
    choice["delta"] =
        first ? json{{"role", "assistant"}, {"content", ""}} : json{{"content", text}};
  } else {
    choice["text"] = text;
  }
  json j = ChunkEnvelope();
  j["choices"] = json::array({std::move(choice)});
  return j;
}

json GenerationJob::TimingsJson() const {
  // A tachyon extension (like llama.cpp's "timings"): where the time of this request went.
  auto ms = [](double s) { return std::round(s * 1e6) / 1e3; };
  bool any = false;
  Clock::time_point first{};
  int tokens = 0;
  for (const Choice& c : choices_) {
    tokens += c.completion_tokens;
    if (c.has_first_token && (!any || c.first_token < first)) first = c.first_token;
    any = any || c.has_first_token;
  }
  json t = {{"queue_ms", queue_seconds_ >= 0 ? json(ms(queue_seconds_)) : json(nullptr)},
            {"ttft_ms", any ? json(ms(Seconds(first - spec_.arrival))) : json(nullptr)},
            {"e2e_ms", ms(Seconds(last_finish_ - spec_.arrival))}};
  double gen = any ? Seconds(last_finish_ - first) : 0;
  t["generation_ms"] = ms(gen);
  t["output_tokens_per_second"] =
      gen > 0 && tokens > 1 ? json(std::round((tokens - 1) / gen * 100) / 100) : json(nullptr);
  const engine::TtftBreakdown& b = engine_ttft_;
  if (b.first_token_seconds >= 0) {  // where the engine's part of the TTFT went
    t["ttft_breakdown"] = {{"engine_ttft_ms", ms(b.first_token_seconds)},
                           {"inbox_ms", ms(b.inbox_seconds)},
                           {"queued_ms", ms(b.queued_seconds)},
                           {"prefix_wait_ms", ms(b.prefix_wait_seconds)},
                           {"prefill_ms", ms(b.prefill_seconds)},
                           {"stalled_ms", ms(b.stalled_seconds)},
                           {"steps", b.steps},
                           {"prefill_steps", b.prefill_steps},
                           {"prefill_tokens", b.prefill_tokens},
                           {"prefill_step_tokens", b.prefill_step_tokens}};
  }
  return t;
}

json GenerationJob::UsageJson() const {
  int prompt_tokens = 0, completion_tokens = 0;
  std::vector<int> cached(spec_.prompts.size(), 0);
  for (size_t p = 0; p < spec_.prompts.size(); ++p) {
    prompt_tokens += static_cast<int>(spec_.prompts[p].ids.size());
  }
  for (const Choice& c : choices_) {
    completion_tokens += c.completion_tokens;
    cached[c.prompt_index] = std::max(cached[c.prompt_index], c.cached_tokens);
  }
  int cached_tokens = 0;
  for (int v : cached) cached_tokens += v;
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json GenerationJob::FinalBody() const {
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json lp = c.logprobs.empty() ? json(nullptr) : c.logprobs;
    if (spec_.chat && !lp.is_null()) lp = json{{"content", c.logprobs}, {"refusal", nullptr}};
    json choice = {{"index", i}, {"logprobs", lp}, {"finish_reason", FinishName(c)}};
    if (spec_.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}};
      if (c.reasoning) choice["message"]["reasoning_content"] = c.reasoning_text;
      if (!c.calls.empty()) {
        const bool blank = c.text.find_first_not_of(" \t\r\n") == std::string::npos;
        if (blank) choice["message"]["content"] = nullptr;
        json calls = json::array();
        for (const ToolCall& call : c.calls) calls.push_back(ToolCallJson(call));
        choice["message"]["tool_calls"] = std::move(calls);
      }
    } else {
      choice["text"] = spec_.echo ? spec_.prompts[c.prompt_index].echo_text + c.text : c.text;
    }
    choices.push_back(std::move(choice));
  }
  return {{"id", spec_.id},
          {"object", spec_.chat ? "chat.completion" : "text_completion"},
          {"created", spec_.created},
          {"model", spec_.model},
          {"system_fingerprint", nullptr},
          {"choices", std::move(choices)},
          {"usage", UsageJson()},
          {"timings", TimingsJson()}};
}

void GenerationJob::WriteEvent(const json& event) {
  if (done_) return;
  const bool written =
      spec_.adapter ? spec_.adapter->Chunk(event, *channel_) : channel_->Write(SseData(event));
  if (!written) {
    // The channel closes and reports OnClose; make sure the engine stops now.
    Cancel();
  }
}

void GenerationJob::Complete() {
  if (spec_.stream) {
    if (spec_.include_usage) {
      json j = ChunkEnvelope();
      j["choices"] = json::array();
      j["usage"] = UsageJson();
      j["timings"] = TimingsJson();
      WriteEvent(j);
    }
    if (spec_.adapter) {
      spec_.adapter->End(*channel_);
    } else {
      channel_->Write(std::string(kSseDone));
      channel_->EndStream();
    }
  } else if (spec_.adapter) {
    spec_.adapter->Complete(FinalBody(), *channel_);
  } else {
    HttpResponse r;
    r.body = DumpJson(FinalBody());
    channel_->Respond(std::move(r));
  }
  done_ = true;
  ctx_.metrics->CountRequest(spec_.endpoint, 200);
}

void GenerationJob::Fail(const ApiError& error) {
  if (done_) return;
  done_ = true;
  ctx_.metrics->CountRequest(spec_.endpoint, error.http_status);
  if (spec_.adapter) return spec_.adapter->Error(error, stream_started_, *channel_);
  if (stream_started_) {
    channel_->Write(SseData(error.ToJson()));
    channel_->Write(std::string(kSseDone));
    channel_->EndStream();
    return;
  }
  HttpResponse r;
  r.status = error.http_status;
  r.body = error.Body();
  if (error.retry_after_s > 0)
    r.headers.emplace_back("Retry-After", std::to_string(error.retry_after_s));
  channel_->Respond(std::move(r));
}

void GenerationJob::OnClientGone() {
  if (done_) return;
  done_ = true;
  ctx_.metrics->CountRequest(spec_.endpoint, 499);
  TLOG(DEBUG) << spec_.id << ": client disconnected, aborting";
  Cancel();
}

}  // namespace tachyon::server
