// GenerationBackend: the narrow seam between the HTTP/OpenAI layers of server/ and whatever
// generates tokens (the real engine adapter, or FakeBackend in tests).
//
// The server parses and validates a request, renders the chat template and tokenizes the prompt
// through the backend, then Submit()s one GenerationRequest per prompt. Requests, sampling
// parameters, outputs, finish reasons, logprobs and metrics are the engine's own types
// (engine/engine.h, engine/output.h, sampling/sampling_params.h), from the HTTP layer down to
// the sampler. The backend reports progress through the OutputCallback (see there). After the
// final output of every choice the callback is never called again and is destroyed.
//
// Thread-safety: every method may be called from any thread concurrently. The callback runs
// on a backend-owned thread (possibly the engine loop): it must be cheap and must never block
// (the server only queues the chunk and hands it to an io thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/output.h"
#include "grammar/grammar.h"
#include "engine/pooling_engine.h"
#include "util/status.h"

namespace tachyon::server {

// One prompt's request, in the engine's own types: prompt_tokens, the SamplingParams (n
// choices: sequences forked from the prompt, sharing its KV blocks; choice i samples with
// seed + i when a seed is set), priority and cache_salt. Already validated by the server.
// Prefill/decode disaggregation (docs/pd.md): a request with an address is run as a prefill
// for a decode replica, its prompt's KV blocks sent to that replica's KV listener as they are
// computed; the final output waits until the transfer ended. Empty address: none.
struct KvTransferTarget {
  std::string address;      // HOST:PORT of the decode replica's --kv-port
  std::string transfer_id;  // names the transfer in logs (the router's request id)
  bool enabled() const { return !address.empty(); }
};

struct GenerationRequest {
  std::string request_id;
  engine::EngineRequest engine;
  KvTransferTarget kv_transfer;
};

// Progress of one choice: engine::RequestOutput. Per choice (RequestOutput::index in [0, n)),
// zero or more outputs with new tokens and text (always complete UTF-8), then exactly one with
// finish_reason != kNone: kStop, kLength, kAbort, or kError with `error` saying why. The final
// output of a choice carries the usage (prompt and cached prompt tokens) and queue_seconds.
using OutputCallback = std::function<void(engine::RequestOutput output)>;

struct ModelInfo {
  std::string name;  // default served model name
  int context_length = 0;
  int vocab_size = 0;
  bool has_chat_template = false;
  int max_live_sequences = 0;  // > 0: a request with more choices than this can never be taken
  // What the model serves: generation (completions, chat), or pooling: embeddings
  // (embedding_dim > 0; also rerank / score by cosine) or relevance scores of a
  // cross-encoder (reranker: rerank / score). context_length is then the longest input.
  bool generates = true;
  int embedding_dim = 0;
  bool reranker = false;
  bool normalized = false;  // embeddings are L2-normalised (dimensions may truncate them)
};

class GenerationBackend {
 public:
  virtual ~GenerationBackend() = default;

  virtual const ModelInfo& Info() const = 0;
  // True when the model is loaded and the engine loop is alive.
  virtual bool Ready() const = 0;

  virtual Result<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) const = 0;
  // Decodes ids to text (invalid UTF-8 becomes U+FFFD). Ids out of range are InvalidArgument.
  virtual Result<std::string> Detokenize(std::span<const int32_t> ids) const = 0;
  // The raw bytes of one token's piece (may be a partial UTF-8 sequence).
  virtual std::string TokenBytes(int32_t id) const = 0;

  // Renders the conversation with the model's chat template. `context` holds `messages`,
  // `tools` (or null) and `add_generation_prompt`, plus any extra template variables.
  virtual Result<std::string> ApplyChatTemplate(const nlohmann::ordered_json& context) const = 0;

  // The prompt ids of a conversation: the rendering of `context` (as ApplyChatTemplate) followed
  // by `suffix` (trusted markup, e.g. a forced tool-call opening), tokenized with BOS/EOS when
  // `add_special`. Special-token text that came from the request (message content, tool calls,
  // tool definitions, extra template variables) is tokenized as plain text, so a client cannot
  // forge control tokens (see server/chat_prompt.h). The default tokenizes ApplyChatTemplate's
  // text plus `suffix` with Tokenize, for backends whose tokenizer has no special tokens.
  virtual Result<std::vector<int32_t>> TokenizeChat(const nlohmann::ordered_json& context,
                                                    std::string_view suffix,
                                                    bool add_special) const;

  // Compiles an output constraint for this model's vocabulary (through the backend's grammar
  // cache: a spec asked for again is not recompiled). Errors: InvalidArgument naming the
  // problem (GBNF syntax, unsupported JSON Schema keyword, compile budget), which the server
  // answers with a 400. The default: InvalidArgument (no structured output on this backend).
  virtual Result<std::shared_ptr<const grammar::CompiledGrammar>> CompileConstraint(
      const grammar::ConstraintSpec& spec) const;

  // Queues a request (all n choices). Errors: ResourceExhausted when the queue is full,
  // Unavailable when shutting down, InvalidArgument for a request the engine cannot take. On
  // error the callback is never called. On success returns a handle for Cancel().
  virtual Result<uint64_t> Submit(GenerationRequest request, OutputCallback callback) = 0;
  // Aborts a request: its KV blocks are freed promptly and every unfinished choice receives a
  // final output with engine::FinishReason::kAbort. Unknown handles are ignored.
  virtual void Cancel(uint64_t handle) = 0;

  // Pooling models (ModelInfo::generates false): the ids of one input, with the model's
  // special tokens, truncated to context_length as sentence-transformers does (the final
  // special token kept). With `pair` (cross-encoders): the pair template, [CLS] a [SEP] b [SEP]
  // with token types 0 / 1 (models without token types: <s> a </s></s> b </s>), the longer
  // side truncated first. Default: Unimplemented.
  virtual Result<engine::PoolingRequest> TokenizeForPooling(std::string_view text,
                                                            const std::string_view* pair) const;
  // Queues one pooling input; the callback runs once, on a backend thread (it must not block).
  // Errors as engine::PoolingEngine::Submit. Default: Unimplemented.
  virtual Status SubmitPooling(engine::PoolingRequest request, engine::PoolingCallback callback);

  // A snapshot of the engine's gauges and counters (for /metrics).
  virtual engine::EngineMetrics Metrics() const = 0;
};

}  // namespace tachyon::server
