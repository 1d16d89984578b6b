// FakeBackend: a deterministic in-process GenerationBackend for tests of the HTTP and protocol
// layers. Never used by `tachyon serve`.
//
// Tokenizer: one token per byte (ids 0..255), BOS = 256, EOS = 257; vocab 258.
// Generation: choice i of a request emits the bytes of `options.text` starting at offset
// ((seed + i) % size), one token per step, every `step_interval`; greedy and seeded requests are
// therefore reproducible. A request of n choices holds n sequences. Stop strings, max_tokens,
// min_tokens (no EOS before it), logprobs and the context limit behave like the engine; outputs
// are engine::RequestOutput, with `finished` on the request's last one. Constrained requests
// (EngineRequest::grammar, compiled by CompileConstraint over the byte vocabulary) follow their
// grammar: each step takes the text's next byte when every byte is allowed (the free phase of
// a triggered grammar), else, among the allowed tokens, EOS where the grammar may end, else the
// first of '"', '}', ']' allowed (so JSON closes soon), else the text's next byte, else the
// lowest allowed id; the choice finishes with kStop when the grammar is complete. A dedicated
// thread runs the steps; callbacks are invoked on it. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "grammar/compile.h"
#include "server/backend.h"

namespace tachyon::server {

struct FakeBackendOptions {
  std::string text = "Once upon a time there was a tiny robot. ";
  int context_length = 256;
  std::chrono::microseconds step_interval{200};
  int max_running = 8;   // sequences generating at once; the rest wait
  int max_waiting = 64;  // Submit beyond this many waiting sequences is ResourceExhausted
  int eos_after = -1;    // >= 0: emit EOS after this many tokens (unless ignore_eos)
};

class FakeBackend : public GenerationBackend {
 public:
  explicit FakeBackend(FakeBackendOptions options = {});
  ~FakeBackend() override;

  static constexpr int32_t kBos = 256;
  static constexpr int32_t kEos = 257;
  static constexpr int32_t kVocabSize = 258;  // also the vocab the request parser tests use

  const ModelInfo& Info() const override { return info_; }
  bool Ready() const override { return true; }
  Result<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) const override;
  Result<std::string> Detokenize(std::span<const int32_t> ids) const override;
  std::string TokenBytes(int32_t id) const override;
  // Renders "<role>: <content>\n" per message, plus "assistant:" with add_generation_prompt.
  Result<std::string> ApplyChatTemplate(const nlohmann::ordered_json& context) const override;
  Result<std::shared_ptr<const grammar::CompiledGrammar>> CompileConstraint(
      const grammar::ConstraintSpec& spec) const override;
  Result<uint64_t> Submit(GenerationRequest request, OutputCallback callback) override;
  void Cancel(uint64_t handle) override;
  engine::EngineMetrics Metrics() const override;

  // Number of sequences (choices) submitted and not yet finished (for leak checks in tests).
  int64_t Live() const;
  // The prompts (token ids) of the requests submitted so far, in order.
  std::vector<std::vector<int32_t>> SubmittedPrompts() const;
  // The requests submitted so far (prompt, sampling parameters, priority, cache salt), in order.
  std::vector<engine::EngineRequest> SubmittedRequests() const;

 private:
  struct Running {
    uint64_t handle = 0;
    int index = 0;  // choice
    std::shared_ptr<const GenerationRequest> request;
    std::shared_ptr<OutputCallback> callback;  // shared by the request's choices
    std::shared_ptr<int> unfinished;           // the request's choices still generating
    size_t offset = 0;
    int generated = 0;
    std::string text;  // generated text not yet released (may hold a stop-string prefix)
    std::shared_ptr<grammar::TokenMatcher> matcher;  // constrained requests
    bool cancel = false;
  };
  void Loop();
  // The next token of choice `r`: the text's, or the grammar's pick (see above).
  int32_t NextToken(Running& r) const;
  // Advances one request by one token; returns true when it finished.
  bool Step(Running& r, engine::RequestOutput& out);

  FakeBackendOptions options_;
  ModelInfo info_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Running> live_;  // by sequence, in submission order: the first max_running run
  uint64_t next_handle_ = 1;
  uint64_t next_seq_ = 1;
  std::vector<engine::EngineRequest> submitted_;
  bool stop_ = false;
  int64_t generated_total_ = 0;
  int64_t prompt_total_ = 0;
  std::unique_ptr<grammar::GrammarCache> grammars_;
  std::thread thread_;
};

}  // namespace tachyon::server
