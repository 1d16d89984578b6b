// EngineBackend: the real GenerationBackend of `tachyon serve`: a GGUF model run by
// engine::EngineCore, with the model's tokenizer and chat template.
//
// Outputs reach the server through EngineCore's per-request notifier: on the engine thread each
// RequestOutput is converted to a GenerationChunk and handed to the server's callback (which
// only queues it). The engine detokenizes (complete UTF-8 only) and applies stop strings.
// Admission control: at most max_num_seqs + max_queue requests are live; more get
// ResourceExhausted (HTTP 429).
// Thread-safety: as GenerationBackend.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "chat/chat_template.h"
#include "engine/engine_core.h"
#include "model/kv_cache.h"
#include "server/backend.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::server {

struct EngineBackendOptions {
  std::string model_path;  // a GGUF file or a Hugging Face folder (as hub::ResolveModel gives)
  std::string chat_template_path;  // Jinja file or tokenizer_config.json; "" = the model's
  std::string served_name;         // "" = the model file's stem
  int threads = 0;                 // compute threads; <= 0: one per hardware thread
  int64_t kv_cache_bytes = 0;      // KV pool budget; 0: enough for max_num_seqs full contexts,
                                   // capped at 4 GiB
  int64_t max_num_batched_tokens = 2048;
  int max_num_seqs = 64;
  int max_queue = 1024;
  int64_t max_model_len = 0;  // 0: the model's training context
  bool enable_prefix_caching = true;
  // Requests' `priority` orders admission and preemption (else first come, first served).
  bool priority_scheduling = false;
  model::KvDtype kv_dtype = model::kDefaultKvDtype;
  // Quantize float matrices at load: "" keeps the stored types; q8_0, q4_0 or q4_k.
  std::string quantize;
  // End-of-generation ids besides the tokenizer's (e.g. generation_config.json's eos_token_id).
  std::vector<int32_t> extra_eos_token_ids;
};

class EngineBackend : public GenerationBackend {
 public:
  // Loads the model, tokenizer and chat template and starts the engine thread. Errors name the
  // file and what is wrong with it.
  static Result<std::unique_ptr<EngineBackend>> Create(const EngineBackendOptions& options);
  ~EngineBackend() override;

  const ModelInfo& Info() const override { return info_; }
  bool Ready() const override { return ready_; }
  Result<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) const override;
  Result<std::string> Detokenize(std::span<const int32_t> ids) const override;
  std::string TokenBytes(int32_t id) const override;
  Result<std::string> ApplyChatTemplate(const nlohmann::ordered_json& context) const override;
  Result<uint64_t> Submit(GenerationRequest request, OutputCallback callback) override;
  void Cancel(uint64_t handle) override;
  BackendMetrics Metrics() const override;

  // Stops the engine: live requests finish with kAbort, later Submits get Unavailable.
  void Shutdown();
  // One line describing the loaded model and engine sizes (for the startup log).
  const std::string& Summary() const { return summary_; }
  // The chat template's source text ("" when the model has none).
  const std::string& chat_template_source() const { return template_source_; }

 private:
  EngineBackend() = default;

  ModelInfo info_;
  EngineBackendOptions options_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  std::optional<chat::ChatTemplate> template_;
  std::string template_source_;
  std::unique_ptr<engine::EngineCore> core_;
  std::shared_ptr<std::atomic<int64_t>> live_ = std::make_shared<std::atomic<int64_t>>(0);
  std::atomic<int64_t> prompt_tokens_{0};
  std::atomic<bool> ready_{false};
  std::string summary_;
};

}  // namespace tachyon::server
