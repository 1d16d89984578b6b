#include "server/testing/fake_backend.h"

#include <algorithm>
#include <span>

#include "engine/constrained_decoding.h"

namespace tachyon::server {

FakeBackend::FakeBackend(FakeBackendOptions options) : options_(std::move(options)) {
  info_.name = "fake-model";
  info_.context_length = options_.context_length;
  info_.vocab_size = kVocabSize;
  info_.has_chat_template = true;
  std::vector<std::string> bytes(kVocabSize);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  grammars_ = std::make_unique<grammar::GrammarCache>(
      std::move(grammar::Vocabulary::FromTokenBytes(std::move(bytes), {kEos})).value(), 64);
  thread_ = std::thread([this] { Loop(); });
}

FakeBackend::~FakeBackend() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Result<std::vector<int32_t>> FakeBackend::Tokenize(std::string_view text, bool add_special) const {
  std::vector<int32_t> ids;
  if (add_special) ids.push_back(kBos);
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

Result<std::string> FakeBackend::Detokenize(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= info_.vocab_size) {
      return InvalidArgument("token id " + std::to_string(id) + " is out of range");
    }
    out += TokenBytes(id);
  }
  return out;
}

std::string FakeBackend::TokenBytes(int32_t id) const {
  if (id >= 0 && id < 256) return std::string(1, static_cast<char>(id));
  return "";
}

Result<std::string> FakeBackend::ApplyChatTemplate(const nlohmann::ordered_json& context) const {
  std::string out;
  for (const auto& m : context.at("messages")) {
    std::string content = m["content"].is_string() ? m["content"].get<std::string>() : "";
    out += m["role"].get<std::string>() + ": " + content + "\n";
  }
  if (context.value("add_generation_prompt", false)) out += "assistant:";
  return out;
}

Result<std::shared_ptr<const grammar::CompiledGrammar>> FakeBackend::CompileConstraint(
    const grammar::ConstraintSpec& spec) const {
  return grammars_->Get(spec);
}

int32_t FakeBackend::NextToken(Running& r) const {
  const std::string& src = options_.text;
  const int32_t text_byte =
      static_cast<unsigned char>(src[(r.offset + static_cast<size_t>(r.generated)) % src.size()]);
  if (!r.matcher) return text_byte;
  std::vector<uint32_t> mask((info_.vocab_size + 31) / 32);
  r.matcher->FillNextTokenBitmask(mask);
  auto allowed = [&](int32_t t) { return ((mask[t / 32] >> (t % 32)) & 1u) != 0; };
  bool every_byte = true;  // a free phase (server/triggered_grammar.h): follow the text
  for (int32_t t = 0; t < 256 && every_byte; ++t) every_byte = allowed(t);
  if (every_byte) return text_byte;
  if (allowed(kEos)) return kEos;
  for (int32_t t : {int32_t{'"'}, int32_t{'}'}, int32_t{']'}, text_byte}) {
    if (allowed(t)) return t;
  }
  for (int32_t t = 0; t < info_.vocab_size; ++t) {
    if (allowed(t)) return t;
  }
  return kEos;  // a grammar that allows nothing: end the choice
}

Result<uint64_t> FakeBackend::Submit(GenerationRequest request, OutputCallback callback) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return Unavailable("the backend is shutting down");
  const std::vector<int32_t>& prompt = request.engine.prompt_tokens;
  if (static_cast<int>(prompt.size()) >= info_.context_length) {
    return InvalidArgument("prompt does not fit in the context");
  }
  const int n = std::max(1, request.engine.params.n);
  if (static_cast<int64_t>(live_.size()) + n > options_.max_running + options_.max_waiting) {
    return ResourceExhausted("the request queue is full");
  }
  // Each choice's matcher, as the engine makes it (a continuation replays its resumed tokens).
  const engine::EngineRequest& e = request.engine;
  const size_t resumed = e.params.ResumedTokens(prompt.size());
  std::vector<std::unique_ptr<grammar::TokenMatcher>> matchers;
  for (int i = 0; e.grammar && i < n; ++i) {
    auto m = engine::NewChoiceMatcher(
        *e.grammar, std::span(prompt).last(resumed),
        e.grammar_within_max_tokens && e.params.max_tokens > 0 ? e.params.max_tokens : -1);
    if (!m.ok()) return m.status();
    matchers.push_back(std::move(m).value());
  }
  uint64_t handle = next_handle_++;
  prompt_total_ += static_cast<int64_t>(prompt.size());
  submitted_.push_back(request.engine);
  auto shared_request = std::make_shared<const GenerationRequest>(std::move(request));
  auto shared_callback = std::make_shared<OutputCallback>(std::move(callback));
  auto unfinished = std::make_shared<int>(n);
  for (int i = 0; i < n; ++i) {
    Running r;
    r.handle = handle;
    r.index = i;
    r.offset = (shared_request->engine.params.seed.value_or(0) + static_cast<uint64_t>(i)) %
               options_.text.size();
    r.request = shared_request;
    if (!matchers.empty()) r.matcher = std::move(matchers[static_cast<size_t>(i)]);
    r.callback = shared_callback;
    r.unfinished = unfinished;
    live_.emplace(next_seq_++, std::move(r));
  }
  cv_.notify_all();
  return handle;
}

std::vector<std::vector<int32_t>> FakeBackend::SubmittedPrompts() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::vector<int32_t>> prompts;
  for (const engine::EngineRequest& r : submitted_) prompts.push_back(r.prompt_tokens);
  return prompts;
}

std::vector<engine::EngineRequest> FakeBackend::SubmittedRequests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return submitted_;
}

void FakeBackend::Cancel(uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [seq, r] : live_) {
    if (r.handle == handle) r.cancel = true;
  }
  cv_.notify_all();
}

int64_t FakeBackend::Live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(live_.size());
}

engine::EngineMetrics FakeBackend::Metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  engine::EngineMetrics m;
  m.num_running = std::min(static_cast<int>(live_.size()), options_.max_running);
  m.num_waiting = static_cast<int>(live_.size()) - m.num_running;
  m.kv.num_blocks = 64;
  m.kv.used_blocks = m.num_running;
  m.prompt_tokens_received = prompt_total_;
  m.generation_tokens = generated_total_;
  return m;
}

bool FakeBackend::Step(Running& r, engine::RequestOutput& out) {
  using engine::FinishReason;
  const sampling::SamplingParams& s = r.request->engine.params;
  const std::vector<int32_t>& prompt = r.request->engine.prompt_tokens;
  out.index = r.index;
  auto finish = [&](FinishReason reason) {
    out.finish_reason = reason;
    out.finished = --*r.unfinished == 0;
    out.usage.prompt_tokens = static_cast<int64_t>(prompt.size());
    out.queue_seconds = 0;
    return true;
  };
  if (r.cancel) return finish(FinishReason::kAbort);
  if (options_.eos_after >= 0 && r.generated >= options_.eos_after && r.generated >= s.min_tokens &&
      !s.ignore_eos) {
    out.text = std::move(r.text);
    return finish(FinishReason::kStop);
  }
  const int32_t c = NextToken(r);
  if (r.matcher && (c == kEos || !r.matcher->AcceptToken(c))) {
    out.text = std::move(r.text);
    return finish(FinishReason::kStop);
  }
  r.generated++;
  generated_total_++;
  out.token_ids.push_back(c);
  if (s.logprobs >= 0) {
    engine::TokenLogprobs lp{c, -0.5f, {}};
    for (int k = 0; k < s.logprobs; ++k) {
      int32_t id = k == 0 ? c : static_cast<int32_t>((c + k) % 256);
      lp.top.push_back({id, -0.5f - static_cast<float>(k)});
    }
    out.logprobs.push_back(std::move(lp));
  }
  r.text.push_back(static_cast<char>(c));
  if (r.matcher && r.matcher->IsTerminated()) {
    out.text = std::move(r.text);
    return finish(FinishReason::kStop);
  }
  for (const std::string& stop : s.stop) {
    size_t pos = r.text.find(stop);
    if (pos != std::string::npos) {
      out.text = r.text.substr(0, pos);
      return finish(FinishReason::kStop);
    }
  }
  bool length = r.generated >= s.max_tokens ||
                static_cast<int>(prompt.size()) + r.generated >= info_.context_length;
  // Hold back the longest tail that could still become a stop string.
  size_t hold = 0;
  if (!length) {
    for (const std::string& stop : s.stop) {
      for (size_t n = std::min(stop.size() - 1, r.text.size()); n > hold; --n) {
        if (r.text.compare(r.text.size() - n, n, stop, 0, n) == 0) {
          hold = n;
          break;
        }
      }
    }
  }
  out.text = r.text.substr(0, r.text.size() - hold);
  r.text.erase(0, r.text.size() - hold);
  if (length) return finish(FinishReason::kLength);
  return false;
}

void FakeBackend::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, options_.step_interval, [&] { return stop_; });
    if (stop_ && live_.empty()) return;
    // Callbacks are shared by a request's choices; the last reference goes after its last call.
    std::vector<std::pair<std::shared_ptr<OutputCallback>, engine::RequestOutput>> calls;
    int running = 0;
    for (auto it = live_.begin(); it != live_.end();) {
      Running& r = it->second;
      if (stop_) r.cancel = true;
      if (running >= options_.max_running && !r.cancel) {
        ++it;
        continue;
      }
      ++running;
      engine::RequestOutput chunk;
      if (Step(r, chunk)) {
        calls.emplace_back(std::move(r.callback), std::move(chunk));
        it = live_.erase(it);
      } else {
        calls.emplace_back(r.callback, std::move(chunk));
        ++it;
      }
    }
    lock.unlock();
    for (auto& [cb, chunk] : calls) (*cb)(std::move(chunk));
    calls.clear();
    lock.lock();
  }
}

}  // namespace tachyon::server
