#include "server/fake_backend.h"

#include <algorithm>

namespace tachyon::server {

FakeBackend::FakeBackend(FakeBackendOptions options) : options_(std::move(options)) {
  info_.name = "fake-model";
  info_.context_length = options_.context_length;
  info_.vocab_size = 258;
  info_.has_chat_template = true;
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

Result<uint64_t> FakeBackend::Submit(GenerationRequest request, OutputCallback callback) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return Unavailable("the backend is shutting down");
  int64_t waiting = static_cast<int64_t>(live_.size()) - options_.max_running;
  if (waiting >= options_.max_waiting) return ResourceExhausted("the request queue is full");
  if (static_cast<int>(request.prompt_ids.size()) >= info_.context_length) {
    return InvalidArgument("prompt does not fit in the context");
  }
  uint64_t handle = next_handle_++;
  Running r;
  r.offset = request.sampling.seed.value_or(0) % options_.text.size();
  r.request = std::move(request);
  r.callback = std::move(callback);
  prompt_total_ += static_cast<int64_t>(r.request.prompt_ids.size());
  live_.emplace(handle, std::move(r));
  cv_.notify_all();
  return handle;
}

void FakeBackend::Cancel(uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(handle);
  if (it != live_.end()) it->second.cancel = true;
  cv_.notify_all();
}

int64_t FakeBackend::Live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(live_.size());
}

BackendMetrics FakeBackend::Metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  BackendMetrics m;
  m.num_running = std::min<int64_t>(static_cast<int64_t>(live_.size()), options_.max_running);
  m.num_waiting = static_cast<int64_t>(live_.size()) - m.num_running;
  m.kv_blocks_total = 64;
  m.kv_blocks_used = m.num_running;
  m.prompt_tokens_total = prompt_total_;
  m.generation_tokens_total = generated_total_;
  return m;
}

bool FakeBackend::Step(Running& r, GenerationChunk& out) {
  const SamplingOptions& s = r.request.sampling;
  auto finish = [&](FinishReason reason) {
    out.finished = true;
    out.finish_reason = reason;
    out.prompt_tokens = static_cast<int>(r.request.prompt_ids.size());
    out.completion_tokens = r.generated;
    out.queue_seconds = 0;
    return true;
  };
  if (r.cancel) return finish(FinishReason::kAbort);
  if (options_.eos_after >= 0 && r.generated == options_.eos_after && !s.ignore_eos) {
    out.text = std::move(r.text);
    return finish(FinishReason::kStop);
  }
  const std::string& src = options_.text;
  unsigned char c = static_cast<unsigned char>(src[(r.offset + r.generated) % src.size()]);
  r.generated++;
  generated_total_++;
  out.token_ids.push_back(c);
  if (s.logprobs >= 0) {
    TokenLogprob lp{c, -0.5f, {}};
    for (int k = 0; k < s.logprobs; ++k) {
      int32_t id = k == 0 ? c : static_cast<int32_t>((c + k) % 256);
      lp.top.push_back({id, -0.5f - static_cast<float>(k)});
    }
    out.logprobs.push_back(std::move(lp));
  }
  r.text.push_back(static_cast<char>(c));
  for (const std::string& stop : s.stop) {
    size_t pos = r.text.find(stop);
    if (pos != std::string::npos) {
      out.text = r.text.substr(0, pos);
      return finish(FinishReason::kStop);
    }
  }
  bool length = r.generated >= s.max_tokens ||
                static_cast<int>(r.request.prompt_ids.size()) + r.generated >= info_.context_length;
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
    std::vector<std::pair<OutputCallback*, GenerationChunk>> calls;
    std::vector<OutputCallback> finished;  // destroyed after their last call
    finished.reserve(live_.size());        // `calls` points into it
    int running = 0;
    for (auto it = live_.begin(); it != live_.end();) {
      Running& r = it->second;
      if (stop_) r.cancel = true;
      if (running >= options_.max_running && !r.cancel) {
        ++it;
        continue;
      }
      ++running;
      GenerationChunk chunk;
      if (Step(r, chunk)) {
        finished.push_back(std::move(r.callback));
        calls.emplace_back(&finished.back(), std::move(chunk));
        it = live_.erase(it);
      } else {
        calls.emplace_back(&r.callback, std::move(chunk));
        ++it;
      }
    }
    lock.unlock();
    for (auto& [cb, chunk] : calls) (*cb)(std::move(chunk));
    finished.clear();
    lock.lock();
  }
}

}  // namespace tachyon::server
