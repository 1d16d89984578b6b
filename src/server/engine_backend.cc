#include "server/engine_backend.h"

#include <algorithm>

#include "server/chat_prompt.h"

namespace tachyon::server {
namespace {
constexpr size_t kGrammarCacheSize = 256;  // compiled grammars kept (LRU)
}  // namespace

Result<std::unique_ptr<EngineBackend>> EngineBackend::Create(engine::ServingEngine engine,
                                                             int max_queue,
                                                             bool allow_special_tokens_in_content) {
  if (!engine.tokenizer || (!engine.core && !engine.pooler)) {
    return InvalidArgument("the server needs an engine with a tokenizer");
  }
  std::unique_ptr<EngineBackend> b(new EngineBackend(std::move(engine)));
  if (b->se_.pooler) {
    const engine::PoolingEngine& pe = *b->se_.pooler;
    b->info_.name = b->se_.name;
    b->info_.context_length = static_cast<int>(pe.config().max_tokens);
    b->info_.vocab_size = static_cast<int>(b->se_.model->config().n_vocab);
    b->info_.generates = false;
    b->info_.reranker = b->se_.pooling == model::PoolingType::kRank;
    b->info_.embedding_dim = b->info_.reranker ? 0 : static_cast<int>(pe.dim());
    b->info_.normalized = !b->info_.reranker && b->se_.model->config().normalize_embeddings;
    b->ready_ = true;
    return b;
  }
  const engine::EngineConfig& ec = b->se_.core->config();
  b->max_live_ = static_cast<int64_t>(ec.scheduler.max_num_seqs) + std::max(max_queue, 0);
  b->allow_special_tokens_in_content_ = allow_special_tokens_in_content;
  b->info_.name = b->se_.name;
  b->info_.context_length = static_cast<int>(b->se_.kv.max_model_len);
  b->info_.vocab_size = static_cast<int>(b->se_.core->n_vocab());
  b->info_.has_chat_template = b->se_.chat_template.has_value();
  b->info_.max_live_sequences = static_cast<int>(b->max_live_);
  b->InitGrammars();
  b->ready_ = true;
  return b;
}

void EngineBackend::InitGrammars() {
  const tokenizer::Tokenizer& t = *se_.tokenizer;
  if (t.vocab_size() > info_.vocab_size) {
    grammar_error_ = "the tokenizer has more tokens (" + std::to_string(t.vocab_size()) +
                     ") than the model's output (" + std::to_string(info_.vocab_size) + ")";
    return;
  }
  auto vocab = grammar::Vocabulary::FromTokenizer(t, se_.eos_token_ids);
  if (!vocab.ok()) {
    grammar_error_ = vocab.status().message();
    return;
  }
  grammars_ = std::make_unique<grammar::GrammarCache>(std::move(*vocab), kGrammarCacheSize);
}

Result<std::shared_ptr<const grammar::CompiledGrammar>> EngineBackend::CompileConstraint(
    const grammar::ConstraintSpec& spec) const {
  if (!grammars_) {
    return InvalidArgument("structured output is not available for this model: " +
                           grammar_error_ + ".");
  }
  return grammars_->Get(spec);
}

EngineBackend::~EngineBackend() {
  Shutdown();
}

void EngineBackend::Shutdown() {
  ready_ = false;
  if (se_.core) se_.core->Stop();
  if (se_.pooler) se_.pooler->Stop();
}

namespace {
// Keeps the first `max` ids, ending with the last one when it is a special token ([SEP]).
void Truncate(std::vector<int32_t>& ids, size_t max, const tokenizer::Tokenizer& tok) {
  if (ids.size() <= max || max == 0) return;
  const int32_t last = ids.back();
  const bool keep_last = tok.IsSpecial(last) && max >= 2;
  ids.resize(keep_last ? max - 1 : max);
  if (keep_last) ids.push_back(last);
}
}  // namespace

Result<engine::PoolingRequest> EngineBackend::TokenizeForPooling(
    std::string_view text, const std::string_view* pair) const {
  if (!se_.pooler) return InvalidArgument("this model generates text; it serves no embeddings");
  const tokenizer::Tokenizer& tok = *se_.tokenizer;
  const size_t max = static_cast<size_t>(info_.context_length);
  engine::PoolingRequest r;
  r.tokens = tok.Encode(text, /*add_special=*/true, /*parse_special=*/false);
  if (pair == nullptr) {
    Truncate(r.tokens, max, tok);
    return r;
  }
  // a's encoding ends with the separator the pair template repeats.
  std::vector<int32_t> a = std::move(r.tokens);
  std::vector<int32_t> b = tok.Encode(*pair, /*add_special=*/false, /*parse_special=*/false);
  const bool typed = se_.model->config().n_token_types >= 2;
  std::vector<int32_t> sep;
  if (!a.empty() && tok.IsSpecial(a.back())) sep.push_back(a.back());
  const size_t prefix = a.size() > sep.size() && tok.IsSpecial(a.front()) ? 1 : 0;
  std::vector<int32_t> a_text(a.begin() + prefix, a.end() - sep.size());
  const size_t fixed = prefix + sep.size() * (typed ? 2 : 3);
  if (fixed + 2 > max) return InvalidArgument("the context is too short for a pair of inputs");
  while (a_text.size() + b.size() + fixed > max) {  // longest first
    (a_text.size() > b.size() ? a_text : b).pop_back();
  }
  r.tokens.assign(a.begin(), a.begin() + prefix);
  r.tokens.insert(r.tokens.end(), a_text.begin(), a_text.end());
  r.tokens.insert(r.tokens.end(), sep.begin(), sep.end());
  if (!typed) r.tokens.insert(r.tokens.end(), sep.begin(), sep.end());
  const size_t first_len = r.tokens.size();
  r.tokens.insert(r.tokens.end(), b.begin(), b.end());
  r.tokens.insert(r.tokens.end(), sep.begin(), sep.end());
  if (typed) {
    r.token_types.assign(r.tokens.size(), 1);
    std::fill(r.token_types.begin(), r.token_types.begin() + first_len, 0);
  }
  return r;
}

Status EngineBackend::SubmitPooling(engine::PoolingRequest request,
                                    engine::PoolingCallback callback) {
  if (!se_.pooler) return InvalidArgument("this model generates text; it serves no embeddings");
  if (!ready_) return Unavailable("the engine is not running");
  return se_.pooler->Submit(std::move(request), std::move(callback));
}

Result<std::vector<int32_t>> EngineBackend::Tokenize(std::string_view text,
                                                     bool add_special) const {
  return se_.tokenizer->Encode(text, add_special, /*parse_special=*/true);
}

Result<std::string> EngineBackend::Detokenize(std::span<const int32_t> ids) const {
  for (int32_t id : ids) {
    if (id < 0 || id >= se_.tokenizer->vocab_size()) {
      return InvalidArgument("token id " + std::to_string(id) + " is out of range");
    }
  }
  return se_.tokenizer->Decode(std::vector<int32_t>(ids.begin(), ids.end()), /*skip_special=*/true);
}

std::string EngineBackend::TokenBytes(int32_t id) const {
  return se_.tokenizer->TokenBytes(id);
}

nlohmann::ordered_json EngineBackend::TemplateContext(const nlohmann::ordered_json& context) const {
  return ChatTemplateVariables(context, se_.tokenizer->bos_text(), se_.tokenizer->eos_text());
}

Result<std::string> EngineBackend::ApplyChatTemplate(const nlohmann::ordered_json& context) const {
  if (!se_.chat_template) return InvalidArgument("this model has no chat template");
  auto text = se_.chat_template->Render(TemplateContext(context));
  if (!text.ok()) return InvalidArgument(text.status().message());
  return text;
}

Result<std::vector<int32_t>> EngineBackend::TokenizeChat(const nlohmann::ordered_json& context,
                                                         std::string_view suffix,
                                                         bool add_special) const {
  if (!se_.chat_template) return InvalidArgument("this model has no chat template");
  ChatPromptOptions options;
  options.add_special = add_special;
  options.allow_special_in_content = allow_special_tokens_in_content_;
  auto ids = EncodeChatPrompt(*se_.chat_template, *se_.tokenizer, TemplateContext(context), suffix,
                              options);
  if (!ids.ok()) return InvalidArgument(ids.status().message());
  return ids;
}

Result<uint64_t> EngineBackend::Submit(GenerationRequest request, OutputCallback callback) {
  if (!se_.core) return InvalidArgument("this model serves embeddings / scores; it cannot generate");
  if (!ready_) return Unavailable("the engine is not running");
  // Admission counts sequences (a request of n choices holds n), like the engine's limits.
  const int64_t n = std::max(1, request.engine.params.n);
  const int64_t limit = max_live_;
  if (n > limit) {
    return InvalidArgument("n = " + std::to_string(n) +
                           " exceeds what this server holds at once (" + std::to_string(limit) +
                           " sequences)");
  }
  const int64_t before = live_->fetch_add(n);  // released by the final output (or below)
  if (before + n > limit) {
    live_->fetch_sub(n);
    return ResourceExhausted("The server is busy (" + std::to_string(before) +
                             " sequences in flight); retry later.");
  }
  request.engine.params.n = static_cast<int>(n);
  if (request.kv_transfer.enabled()) {
    if (kv_sender_ == nullptr) {
      live_->fetch_sub(n);
      return InvalidArgument(
          "kv_transfer_params: this replica does not send KV (start it with --role prefill)");
    }
    // A prefill for a decode replica: the blocks stream out as they are computed, and the
    // answer waits for the end of the transfer (the router then sends the decode request).
    auto gate = kv_sender_->AnswerGate();
    const auto max_blocks =
        static_cast<uint32_t>(request.engine.prompt_tokens.size() / se_.block_size);
    request.engine.kv_export = kv_sender_->Start(request.kv_transfer, max_blocks,
                                                 [gate](const PdTransferResult&) { gate->Open(); });
    callback = [cb = std::move(callback), gate](engine::RequestOutput out) {
      if (!out.finished) return cb(std::move(out));
      gate->Deliver([cb, out = std::move(out)]() mutable { cb(std::move(out)); });
    };
  }
  std::shared_ptr<engine::KvExportSink> sink = request.engine.kv_export;
  auto id = se_.core->AddRequestWithCallback(
      std::move(request.engine),
      [cb = std::move(callback), live = live_, n](engine::RequestOutput out) {
        const bool request_done = out.finished;  // every choice has finished
        cb(std::move(out));
        if (request_done) live->fetch_sub(n);
      });
  if (!id.ok()) {
    if (sink) sink->OnEnd(id.status());
    live_->fetch_sub(n);
    return id.status();
  }
  return *id;
}

void EngineBackend::Cancel(uint64_t handle) {
  if (se_.core) se_.core->Abort(handle);
}

engine::EngineMetrics EngineBackend::Metrics() const {
  return se_.core ? se_.core->Metrics() : se_.pooler->Metrics();
}

}  // namespace tachyon::server
