// PromptKeys: the prefix-cache block hashes of a request's prompt, computed by the router the
// way a replica computes them: the prompt rendered with the chat template and encoded with the
// model's tokenizer exactly as `tachyon serve` does (server::ParseChatRequest ->
// ChatTemplateVariables -> EncodeChatPrompt; a completions text prompt with
// Tokenizer::Encode(add_special, parse_special)), then hashed in block_size-token blocks with
// kv::ExtendBlockHashes from kv::RootHash(cache_salt).
//
// Thread-safety: const methods may be called concurrently.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "kv/block_hash.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace tachyon::router {

struct PromptBlocks {
  std::vector<kv::BlockHash> hashes;  // full blocks, first first
  int prompt_tokens = 0;
  // Names the request in keyed ties and canary shares (ReplicaPool::Place): BlockKey of the
  // last full block when there is one (so prompts sharing their blocks share it), else a hash
  // of the tokens in the cache salt's namespace. The router names a request it could not
  // tokenize by a hash of its body. nullopt: not named (the pool's seeded RNG decides).
  std::optional<uint64_t> key;
};

class PromptKeys {
 public:
  // `tokenizer_path`: anything tokenizer::Tokenizer::FromFile takes (a GGUF model file, a
  // tokenizer.json or a folder). `chat_template_path`: a template file, or "" for the
  // tokenizer's own (chat requests are then routed without prefix keys if it has none).
  // Errors: the tokenizer's or template's, naming the file.
  static Result<std::unique_ptr<PromptKeys>> Load(const std::string& tokenizer_path,
                                                  const std::string& chat_template_path,
                                                  int block_size);

  // The prompt's blocks of a /v1/chat/completions or /v1/completions body (the first prompt
  // of a completions batch). nullopt when the body is not a valid request of that kind (the
  // replica answers its error) or the model has no chat template.
  std::optional<PromptBlocks> ForChat(const nlohmann::ordered_json& body) const;
  std::optional<PromptBlocks> ForCompletion(const nlohmann::json& body) const;

  // Block hashes (and key) of `tokens` in namespace `cache_salt`.
  PromptBlocks Hash(const std::vector<int32_t>& tokens, const std::string& cache_salt) const;

  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  PromptKeys() = default;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::optional<chat::ChatTemplate> template_;
  int block_size_ = 16;
};

}  // namespace tachyon::router
