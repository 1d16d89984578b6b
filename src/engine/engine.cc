#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <thread>
#include <utility>

#include "sampling/sampler.h"
#include "spec/draft_sampling.h"
#include "spec/rejection_sampler.h"
#include "util/logging.h"

namespace tachyon::engine {
namespace {
bool Contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Whether a step computes prompt tokens (anything but each sequence's last known token and
// its drafts).
bool HasPromptRows(const SchedulerOutput& out) {
  return std::any_of(out.seqs.begin(), out.seqs.end(), [](const ScheduledSeq& s) {
    return !s.sample || s.num_new_tokens - s.num_draft_tokens != 1;
  });
}
}  // namespace

Result<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config, ModelExecutor* executor,
                                               std::unique_ptr<spec::Drafter> drafter,
                                               ModelExecutor* draft_executor) {
  if (executor == nullptr) return InvalidArgument("engine: no model executor");
  if (config.kv.num_blocks <= 0 || config.kv.block_size <= 0) {
    return InvalidArgument("engine: the KV pool needs num_blocks > 0 and block_size > 0");
  }
  if (config.scheduler.max_num_batched_tokens <= 0 || config.scheduler.max_num_seqs <= 0) {
    return InvalidArgument("engine: max_num_batched_tokens and max_num_seqs must be positive");
  }
  if (config.max_model_len <= 1) return InvalidArgument("engine: max_model_len must be > 1");
  for (int64_t w : config.kv.group_windows) {
    if (w < 0) return InvalidArgument("engine: a KV group's sliding window must be >= 0");
  }
  std::unique_ptr<Speculator> speculator;
  if (config.speculative.enabled()) {
    std::unique_ptr<DraftModelRunner> draft_model;
    if (config.speculative.method == spec::SpecMethod::kDraftModel && draft_executor) {
      // The draft's logits may cover a prefix of the vocabulary (draft_vocab_size); the
      // tokenizers were compared when the draft was loaded.
      if (draft_executor->n_vocab() > executor->n_vocab()) {
        return InvalidArgument("engine: the draft model's vocabulary is larger than the target's");
      }
      DraftModelConfig dc;
      dc.kv = config.kv;
      if (config.draft_num_blocks > 0) dc.kv.num_blocks = config.draft_num_blocks;
      dc.kv.group_windows = config.draft_group_windows;
      dc.kv.event_sink = nullptr;  // the router indexes the target's blocks only
      dc.max_num_batched_tokens = config.scheduler.max_num_batched_tokens;
      dc.eos_token_ids = config.eos_token_ids;
      dc.p_min = config.speculative.draft_p_min;
      dc.n_vocab = executor->n_vocab();
      draft_model = std::make_unique<DraftModelRunner>(dc, draft_executor);
    }
    ASSIGN_OR_RETURN(speculator, Speculator::Create(config.speculative, std::move(drafter),
                                                    std::move(draft_model)));
  }
  auto engine = std::unique_ptr<Engine>(new Engine(config, executor));
  engine->speculator_ = std::move(speculator);
  engine->offload_ = KvOffload::Create(config.kv_stores, &engine->kv_, executor->block_bytes());
  return engine;
}

Engine::Engine(const EngineConfig& config, ModelExecutor* executor)
    : config_(config),
      executor_(executor),
      kv_(config.kv),
      scheduler_(config.scheduler, &kv_),
      runner_(executor),
      masks_(executor->n_vocab()) {}

int64_t Engine::MaxChunk() const {
  const SchedulerConfig& s = config_.scheduler;
  return s.long_prefill_token_threshold > 0
             ? std::min(s.long_prefill_token_threshold, s.max_num_batched_tokens)
             : s.max_num_batched_tokens;
}

int64_t Engine::TokenLimit() const {
  return std::min(config_.max_model_len, kv_.MaxTokens(MaxChunk()));
}

Status Engine::Validate(const EngineRequest& req) const {
  RETURN_IF_ERROR(CheckLimits(req));
  // A continuation's resumed tokens, replayed as Add will (a stream's head is not sent yet).
  if (req.params.ResumedTokens(req.prompt_tokens.size()) > 0) {
    RETURN_IF_ERROR(StartChoice(req, ChoiceMaxTokens(req)).status());
  }
  return OkStatus();
}

Status Engine::CheckLimits(const EngineRequest& req) const {
  const int32_t n_vocab = executor_->n_vocab();
  if (req.prompt_tokens.empty()) return InvalidArgument("the prompt is empty");
  for (int32_t t : req.prompt_tokens) {
    if (t < 0 || t >= n_vocab) {
      return InvalidArgument("prompt token id " + std::to_string(t) +
                             " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    }
  }
  RETURN_IF_ERROR(req.params.Validate(n_vocab));
  if (!req.params.stop.empty() && !config_.detokenizer) {
    return InvalidArgument("stop strings need a tokenizer, and this engine has none");
  }
  const int64_t prompt = static_cast<int64_t>(req.prompt_tokens.size());
  if (prompt >= config_.max_model_len) {
    return InvalidArgument(
        "the prompt has " + std::to_string(prompt) + " tokens; the model's context holds " +
        std::to_string(config_.max_model_len) + " including at least one generated token");
  }
  const int64_t max_tokens = req.params.max_tokens;
  if (max_tokens > 0 && prompt + max_tokens > config_.max_model_len) {
    return InvalidArgument("prompt (" + std::to_string(prompt) + " tokens) + max_tokens (" +
                           std::to_string(max_tokens) + ") exceeds the context length " +
                           std::to_string(config_.max_model_len));
  }
  const int64_t needed = prompt + std::max<int64_t>(max_tokens, 1);
  // With sliding-window groups a request holds only their window's blocks (kv_groups.h).
  if (kv_.PeakBlocks(needed, MaxChunk()) > kv_.num_blocks()) {
    return InvalidArgument("the request needs " + std::to_string(needed) +
                           " tokens of KV cache but the whole pool holds " +
                           std::to_string(kv_.MaxTokens(MaxChunk())));
  }
  return OkStatus();
}

int64_t Engine::ChoiceMaxTokens(const EngineRequest& req) const {
  return req.params.max_tokens > 0 ? req.params.max_tokens
                                   : TokenLimit() - static_cast<int64_t>(req.prompt_tokens.size());
}

// A continuation (params.output_offset = k > 0) ends its prompt with output tokens already
// delivered: they go through the output constraint, the decoder and the stop strings as they
// went in the original stream, their text unsent (the original sent it, or still held it back —
// a newline, an incomplete UTF-8 sequence, the start of a stop string —, which then comes out
// with the next token as it would have).
Result<Engine::ChoiceStart> Engine::StartChoice(const EngineRequest& req,
                                                int64_t max_tokens) const {
  const size_t resumed = req.params.ResumedTokens(req.prompt_tokens.size());
  const std::span<const int32_t> resumed_tokens = std::span(req.prompt_tokens).last(resumed);
  ChoiceStart c;
  if (req.grammar) {
    ASSIGN_OR_RETURN(c.matcher, NewChoiceMatcher(*req.grammar, resumed_tokens,
                                                 req.grammar_within_max_tokens ? max_tokens : -1));
  }
  c.stop = StopStringMatcher(req.params.stop);
  if (!config_.detokenizer) return c;
  c.decoder = config_.detokenizer->NewDecoder();
  c.decoder->SetContext(std::vector<int32_t>(
      req.prompt_tokens.begin(), req.prompt_tokens.end() - static_cast<ptrdiff_t>(resumed)));
  for (int32_t t : resumed_tokens) {
    bool stopped = false;
    c.text += c.stop.Append(c.decoder->Push(t), &stopped);
    if (stopped) return InvalidArgument("the resumed output tokens already complete a stop string");
  }
  return c;
}

Status Engine::Add(uint64_t request_id, EngineRequest req) {
  std::shared_ptr<KvExportSink> sink = req.kv_export;
  Status s = AddChoices(request_id, std::move(req));
  if (!s.ok() && sink) sink->OnEnd(s);  // its transfer ends with the request (none will come)
  return s;
}

Status Engine::AddChoices(uint64_t request_id, EngineRequest req) {
  RETURN_IF_ERROR(CheckLimits(req));  // then each choice's start replays the resumed tokens
  if (groups_.count(request_id)) {
    return InvalidArgument("duplicate request id " + std::to_string(request_id));
  }
  const int64_t prompt = static_cast<int64_t>(req.prompt_tokens.size());
  const int64_t max_tokens = ChoiceMaxTokens(req);
  std::vector<ChoiceStart> starts;
  for (int i = 0; i < req.params.n; ++i) {
    ASSIGN_OR_RETURN(ChoiceStart c, StartChoice(req, max_tokens));
    starts.push_back(std::move(c));
  }
  Group& g = groups_[request_id];
  const uint64_t base_seed = req.params.seed ? *req.params.seed : seed_rng_();
  const uint64_t arrival = next_arrival_++;
  const auto now = std::chrono::steady_clock::now();
  const auto arrived = req.arrival == Clock::time_point{} ? now : std::min(req.arrival, now);
  for (int i = 0; i < req.params.n; ++i) {
    auto r = std::make_unique<Request>();
    r->seq_id = next_seq_id_++;
    r->request_id = request_id;
    r->index = i;
    r->priority = req.priority;
    r->arrival = arrival;
    r->leader = i == 0 ? nullptr : g.choices[0].get();
    r->tokens = req.prompt_tokens;
    r->num_prompt_tokens = prompt;
    r->max_tokens = max_tokens;
    r->params = req.params;
    r->seed = base_seed + static_cast<uint64_t>(i);
    r->cache_salt = req.cache_salt;
    if (i == 0) r->kv_export = req.kv_export;
    r->add_time = arrived;
    r->ttft.inbox_seconds = std::chrono::duration<double>(now - arrived).count();
    ChoiceStart& start = starts[static_cast<size_t>(i)];
    r->decoder = std::move(start.decoder);
    r->stop_matcher = std::move(start.stop);
    r->matcher = std::move(start.matcher);
    r->resumed_text = std::move(start.text);
    scheduler_.Add(r.get());
    g.choices.push_back(std::move(r));
  }
  g.num_unfinished = req.params.n;
  counters_.prompt_tokens_received += prompt;
  return OkStatus();
}

RequestOutput Engine::NewOutput(const Request& r) const {
  RequestOutput o;
  o.request_id = r.request_id;
  o.index = r.index;
  const Group& g = groups_.at(r.request_id);
  const Request& first = *g.choices[0];
  o.usage.prompt_tokens = first.num_prompt_tokens;
  o.usage.cached_prompt_tokens = std::max<int64_t>(first.num_cached_prompt_tokens, 0);
  if (first.num_cached_prompt_tokens >= 0) {
    o.queue_seconds =
        std::chrono::duration<double>(first.first_scheduled_time - first.add_time).count();
  }
  for (const auto& c : g.choices) o.usage.completion_tokens += c->num_output_tokens();
  o.ttft = r.ttft;
  return o;
}

void Engine::Finish(Request* r, FinishReason reason, RequestOutput* out) {
  exporter_.End(r, reason == FinishReason::kAbort || reason == FinishReason::kError
                       ? Cancelled("the request ended before its prompt was computed")
                       : OkStatus());
  scheduler_.Remove(r);
  r->draft_tokens.clear();
  if (speculator_) speculator_->Release(*r);
  r->finish_reason = reason;
  out->finish_reason = reason;
  Group& g = groups_.at(r->request_id);
  if (--g.num_unfinished == 0) {
    out->finished = true;
    ++counters_.requests_finished;
    finished_groups_.push_back(r->request_id);
  }
}

void Engine::Abort(uint64_t request_id) {
  auto it = groups_.find(request_id);
  if (it == groups_.end()) return;
  for (auto& c : it->second.choices) {
    if (c->state == RequestState::kFinished) continue;
    RequestOutput o = NewOutput(*c);
    Finish(c.get(), FinishReason::kAbort, &o);
    outputs_.push_back(std::move(o));
  }
  ++counters_.requests_aborted;
  finished_groups_.erase(std::remove(finished_groups_.begin(), finished_groups_.end(), request_id),
                         finished_groups_.end());
  groups_.erase(it);
}

void Engine::AbortAll() {
  std::vector<uint64_t> ids;
  for (const auto& [id, g] : groups_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) Abort(id);
}

FinishReason Engine::AppendToken(Request* r, const sampling::SampleResult& s, RequestOutput* out) {
  RequestOutput& o = *out;
  const int32_t tok = s.token;
  const GrammarVerdict grammar = r->matcher ? AcceptSampled(r, tok) : GrammarVerdict::kContinue;
  if (grammar == GrammarVerdict::kRejected) {
    o.error = Internal("the output grammar rejected sampled token " + std::to_string(tok));
    return FinishReason::kError;
  }
  r->tokens.push_back(tok);
  ++counters_.generation_tokens;
  ++o.usage.completion_tokens;
  o.token_ids.push_back(tok);
  if (r->params.logprobs >= 0) o.logprobs.push_back({tok, s.logprob, s.top_logprobs});

  FinishReason reason = FinishReason::kNone;
  bool stopped_by_string = false;
  if ((!r->params.ignore_eos && Contains(config_.eos_token_ids, tok)) ||
      Contains(r->params.stop_token_ids, tok)) {
    reason = FinishReason::kStop;  // the stop token itself is not part of the text
  } else if (r->decoder) {
    const auto t0 = Clock::now();
    o.text += r->stop_matcher.Append(r->decoder->Push(tok), &stopped_by_string);
    if (stopped_by_string) reason = FinishReason::kStop;
    counters_.detokenize_seconds += Since(t0);
  }
  if (reason == FinishReason::kNone && grammar == GrammarVerdict::kTerminated) {
    reason = FinishReason::kStop;
  }
  if (reason == FinishReason::kNone &&
      (r->num_output_tokens() >= r->max_tokens ||
       static_cast<int64_t>(r->tokens.size()) >= config_.max_model_len)) {
    reason = FinishReason::kLength;
  }
  if (reason != FinishReason::kNone && !stopped_by_string && r->decoder) {
    bool stopped = false;
    o.text += r->stop_matcher.Append(r->decoder->Flush(), &stopped);
    if (!stopped) o.text += r->stop_matcher.Flush();
  }
  return reason;
}

void Engine::ProcessSampled(const ScheduledSeq& s, std::span<float> rows,
                            std::span<const uint32_t> mask) {
  Request* r = s.request;
  const int32_t n_vocab = executor_->n_vocab();
  const int64_t k = s.num_draft_tokens;
  // Copied: the draft is replaced once the step's tokens are known.
  const std::vector<int32_t> draft(r->draft_tokens.begin(), r->draft_tokens.begin() + k);
  r->draft_tokens.clear();
  RequestOutput o = NewOutput(*r);
  if (!r->resumed_text.empty()) o.resumed_text = std::exchange(r->resumed_text, std::string());
  int64_t accepted = 0;
  FinishReason finish = FinishReason::kNone;
  // Row j scores the token after the known tokens and the first j drafts; each draft is kept
  // while the request's own sample at its position equals it (spec/rejection_sampler.h: exact
  // for one-hot drafts), and the first sample that differs (or the one after the last draft)
  // is emitted as well.
  for (int64_t j = 0; j <= k && finish == FinishReason::kNone; ++j) {
    sampling::SamplingInput in;
    in.prompt = std::span(r->tokens).first(r->num_prompt_tokens);
    in.output = std::span(r->tokens).subspan(r->num_prompt_tokens);
    in.seed = r->seed;
    in.eos_ids = r->params.ignore_eos ? std::span<const int32_t>()
                                      : std::span<const int32_t>(config_.eos_token_ids);
    if (r->matcher && j == 0) in.allowed = mask;
    if (r->matcher && j > 0) {
      draft_mask_.assign((static_cast<size_t>(n_vocab) + 31) / 32, 0u);
      r->matcher->FillNextTokenBitmask(draft_mask_);
      in.allowed = draft_mask_;
    }
    const auto t_sample = Clock::now();
    // A draft drawn from a draft model's distribution q is verified against q; others are
    // one-hot.
    const std::span<const float> q =
        j < k ? speculator_->DraftProbs(*r, static_cast<int>(j)) : std::span<const float>();
    spec::DeterministicVerdict v =
        q.empty() ? spec::VerifyDeterministicDraft(rows.subspan(j * n_vocab, n_vocab), r->params,
                                                   in, j < k ? draft[j] : -1)
                  : spec::VerifyStochasticDraft(rows.subspan(j * n_vocab, n_vocab), r->params, in,
                                                draft[j], q);
    counters_.sample_seconds += Since(t_sample);
    finish = AppendToken(r, v.sample, &o);
    if (!v.accepted) break;
    ++accepted;  // an emitted draft: its KV (computed this step) is valid
  }
  if (k > 0) {
    speculator_->Verified(*r, static_cast<int>(k), static_cast<int>(accepted));
    scheduler_.OnDraftsVerified(r, accepted);  // before Finish: the cache keeps those blocks
  }
  if (finish != FinishReason::kNone) Finish(r, finish, &o);
  outputs_.push_back(std::move(o));
}

void Engine::FailStep(const SchedulerOutput& out, const Status& error) {
  TLOG(ERROR) << "engine step failed: " << error.ToString();
  std::vector<uint64_t> ids;
  for (const ScheduledSeq& s : out.seqs) ids.push_back(s.request->request_id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (uint64_t id : ids) {
    Group& g = groups_.at(id);
    for (auto& c : g.choices) {
      if (c->state == RequestState::kFinished) continue;
      RequestOutput o = NewOutput(*c);
      o.error = error;
      Finish(c.get(), FinishReason::kError, &o);
      outputs_.push_back(std::move(o));
    }
  }
}

std::vector<RequestOutput> Engine::Step() {
  const auto t_step = Clock::now();
  exporter_.ReleaseDone(&kv_);
  if (offload_) {
    offload_->Poll();
    offload_->Prefetch(scheduler_.Waiting());
  }
  SchedulerOutput out = scheduler_.Schedule();
  if (speculator_) {
    for (int64_t seq_id : out.preempted) speculator_->Preempted(seq_id);
  }
  if (!out.empty()) {
    ++counters_.num_steps;
    const auto t_forward = Clock::now();
    masks_.Start(out);
    exporter_.Plan(out, &kv_, executor_->block_bytes());
    const bool layered = !exporter_.empty() && executor_->SetLayerKvHook([this](int64_t layer) {
      exporter_.OnLayerStored(layer);
    });
    Result<std::span<float>> logits = runner_.Execute(out);
    if (layered) executor_->SetLayerKvHook(nullptr);
    masks_.Wait();
    const double forward_s = Since(t_forward);
    counters_.forward_seconds += forward_s;
    // The cost rule learns from steps of decode and verify rows only: a prompt chunk's rows
    // cost differently (other kernels, attention over the chunk), so a step with one would
    // misprice the rows drafts add.
    if (speculator_ && logits.ok() && !HasPromptRows(out)) {
      speculator_->ObserveStep(out.num_tokens, forward_s);
    }
    if (offload_ && logits.ok()) offload_->ObserveStep(out.num_tokens, forward_s);
    exporter_.Finish(logits.ok());
    if (!logits.ok()) {
      FailStep(out, logits.status());
    } else {
      scheduler_.OnStepComputed(out);
      scheduler_.AccountStep(out, t_step, Clock::now());
      for (size_t i = 0; i < out.seqs.size(); ++i) {
        const ScheduledSeq& s = out.seqs[i];
        if (!s.sample) {
          counters_.prompt_tokens_computed += s.num_new_tokens;
          continue;
        }
        counters_.prompt_tokens_computed += s.num_new_tokens - s.num_draft_tokens - 1;
        const size_t n_vocab = static_cast<size_t>(executor_->n_vocab());
        ProcessSampled(
            s, logits->subspan(runner_.FirstRow(i) * n_vocab, (1 + s.num_draft_tokens) * n_vocab),
            masks_.Mask(i));
      }
      if (speculator_) {
        // Drafts for the next step, now that this step's tokens are known.
        for (const ScheduledSeq& s : out.seqs) {
          Request* r = s.request;
          if (s.sample && r->state == RequestState::kRunning) {
            speculator_->Propose(r, scheduler_.num_running(), config_.max_model_len);
          }
        }
        // The lengths are decided for all of them at once (waiting prompts must not be
        // slowed), and a draft model drafts for all of them at once.
        speculator_->Flush(static_cast<int>(scheduler_.num_waiting()));
      }
    }
  }
  for (uint64_t id : finished_groups_) groups_.erase(id);
  finished_groups_.clear();
  // Only requests waiting for loads: wait for one instead of spinning.
  if (out.empty() && offload_ && offload_->loading()) {
    offload_->WaitForLoad(std::chrono::milliseconds(20));
  } else if (out.empty() && exporter_.holding()) {
    // Only blocks pinned for KV transfers still sending from them: poll, do not spin.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::exchange(outputs_, {});
}

EngineMetrics Engine::Metrics() const {
  EngineMetrics m = counters_;
  m.num_running = scheduler_.num_running();
  m.num_waiting = scheduler_.num_waiting();
  m.kv = kv_.Stats();
  m.num_preemptions = scheduler_.num_preemptions();
  if (speculator_) m.spec = speculator_->stats();
  if (offload_) m.kv_offload = offload_->Stats();
  return m;
}

void Engine::FlushKvStores() {
  if (offload_) offload_->FlushAll();
}

}  // namespace tachyon::engine
