// EngineBackend: the real GenerationBackend of `tachyon serve`: a GGUF model run by
// engine::EngineCore, with the model's tokenizer and chat template; or a pooling model
// (embeddings, reranking) run by engine::PoolingEngine, when the ServingEngine has one.
//
// Outputs reach the server through EngineCore's per-request callback: on the engine thread each
// engine::RequestOutput is handed, as it is, to the server's callback (which only queues it). The
// engine detokenizes (complete UTF-8 only) and applies stop strings. Admission control: at most
// max_num_seqs + max_queue requests are live; more get ResourceExhausted (HTTP 429). Thread-safety:
// as GenerationBackend.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/serving_engine.h"
#include "grammar/compile.h"
#include "server/backend.h"
#include "server/pd_sender.h"

namespace tachyon::server {

class EngineBackend : public GenerationBackend {
 public:
  // Serves `engine` (from engine::BuildServingEngine, its thread running), taking at most
  // max_num_seqs + max_queue sequences at once. Errors: InvalidArgument when the engine has
  // no tokenizer. `allow_special_tokens_in_content`: parse special-token text in chat content
  // as control tokens (trusted clients only; by default content is plain text, see
  // GenerationBackend::TokenizeChat).
  static Result<std::unique_ptr<EngineBackend>> Create(
      engine::ServingEngine engine, int max_queue, bool allow_special_tokens_in_content = false);
  ~EngineBackend() override;

  const ModelInfo& Info() const override { return info_; }
  bool Ready() const override { return ready_; }
  Result<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) const override;
  Result<std::string> Detokenize(std::span<const int32_t> ids) const override;
  std::string TokenBytes(int32_t id) const override;
  Result<std::string> ApplyChatTemplate(const nlohmann::ordered_json& context) const override;
  Result<std::vector<int32_t>> TokenizeChat(const nlohmann::ordered_json& context,
                                            std::string_view suffix,
                                            bool add_special) const override;
  Result<std::shared_ptr<const grammar::CompiledGrammar>> CompileConstraint(
      const grammar::ConstraintSpec& spec) const override;
  Result<engine::PoolingRequest> TokenizeForPooling(std::string_view text,
                                                    const std::string_view* pair) const override;
  Status SubmitPooling(engine::PoolingRequest request, engine::PoolingCallback callback) override;
  Result<uint64_t> Submit(GenerationRequest request, OutputCallback callback) override;
  void Cancel(uint64_t handle) override;
  engine::EngineMetrics Metrics() const override;

  // Stops the engine: live requests finish with kAbort, later Submits get Unavailable.
  void Shutdown();
  // One line describing the loaded model and engine sizes (for the startup log).
  const std::string& Summary() const { return se_.summary; }
  // The chat template's source text ("" when the model has none).
  const std::string& chat_template_source() const { return se_.chat_template_source; }
  const engine::SamplingDefaults& sampling_defaults() const { return se_.sampling_defaults; }
  const std::string& generation_config_note() const { return se_.generation_config_note; }
  // Prefill/decode disaggregation (docs/pd.md): requests with kv_transfer_params send their
  // prompt's KV through `sender` (not owned; it must outlive the engine's requests). Null: such
  // requests are refused. Call before the first Submit.
  void SetKvSender(PdSender* sender) { kv_sender_ = sender; }
  const engine::ServingEngine& serving_engine() const { return se_; }

 private:
  explicit EngineBackend(engine::ServingEngine engine) : se_(std::move(engine)) {}
  // The template variables for a request context (MakeChatContext with this model's bos/eos).
  nlohmann::ordered_json TemplateContext(const nlohmann::ordered_json& context) const;
  void InitGrammars();

  engine::ServingEngine se_;  // its tokenizer is never null (require_tokenizer)
  // Compiled output grammars over the tokenizer's vocabulary; null when the vocabulary cannot
  // be built (grammar_error_ says why).
  std::unique_ptr<grammar::GrammarCache> grammars_;
  std::string grammar_error_;
  ModelInfo info_;
  int64_t max_live_ = 0;  // max_num_seqs + max_queue
  std::shared_ptr<std::atomic<int64_t>> live_ = std::make_shared<std::atomic<int64_t>>(0);
  std::atomic<bool> ready_{false};
  bool allow_special_tokens_in_content_ = false;
  PdSender* kv_sender_ = nullptr;
  std::string summary_;
};

}  // namespace tachyon::server
