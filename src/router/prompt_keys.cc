#include "router/prompt_keys.h"

#include <variant>

#include <xxhash.h>

#include "router/replica_picker.h"
#include "server/chat_prompt.h"
#include "server/protocol.h"

namespace tachyon::router {

Result<std::unique_ptr<PromptKeys>> PromptKeys::Load(const std::string& tokenizer_path,
                                                     const std::string& chat_template_path,
                                                     int block_size) {
  std::unique_ptr<PromptKeys> keys(new PromptKeys());
  keys->block_size_ = block_size;
  auto tok = tokenizer::Tokenizer::FromFile(tokenizer_path);
  if (!tok.ok()) return tok.status().WithContext(tokenizer_path);
  keys->tokenizer_ = std::move(tok).value();
  std::optional<std::string> source;
  if (!chat_template_path.empty()) {
    ASSIGN_OR_RETURN(source, chat::ReadChatTemplateFile(chat_template_path));
  } else {
    source = keys->tokenizer_->chat_template();
  }
  if (source) {
    auto parsed = chat::ChatTemplate::Parse(*source);
    if (!parsed.ok()) {
      return parsed.status().WithContext(chat_template_path.empty() ? tokenizer_path
                                                                    : chat_template_path);
    }
    keys->template_ = std::move(*parsed);
  }
  return keys;
}

PromptBlocks PromptKeys::Hash(const std::vector<int32_t>& tokens,
                              const std::string& cache_salt) const {
  PromptBlocks out;
  out.prompt_tokens = static_cast<int>(tokens.size());
  const kv::BlockHash root = kv::RootHash(cache_salt);
  kv::ExtendBlockHashes(tokens, block_size_, root, tokens.size(), &out.hashes);
  out.key = out.hashes.empty()
                ? XXH3_64bits_withSeed(tokens.data(), tokens.size() * sizeof(int32_t), BlockKey(root))
                : BlockKey(out.hashes.back());
  return out;
}

std::optional<PromptBlocks> PromptKeys::ForChat(const nlohmann::ordered_json& body) const {
  if (!template_) return std::nullopt;
  auto req = server::ParseChatRequest(body, tokenizer_->vocab_size());
  if (!req.ok()) return std::nullopt;
  const nlohmann::ordered_json vars = server::ChatTemplateVariables(
      req.value().template_context, tokenizer_->bos_text(), tokenizer_->eos_text());
  auto ids = server::EncodeChatPrompt(*template_, *tokenizer_, vars, "");
  if (!ids.ok()) return std::nullopt;
  return Hash(*ids, req.value().common.cache_salt);
}

std::optional<PromptBlocks> PromptKeys::ForCompletion(const nlohmann::json& body) const {
  auto req = server::ParseCompletionRequest(body, tokenizer_->vocab_size());
  if (!req.ok()) return std::nullopt;
  const server::PromptInput& first = req.value().prompts.front();
  if (const auto* ids = std::get_if<std::vector<int32_t>>(&first)) {
    return Hash(*ids, req.value().common.cache_salt);
  }
  const std::string& text = std::get<std::string>(first);
  return Hash(tokenizer_->Encode(text, /*add_special=*/true, /*parse_special=*/true),
              req.value().common.cache_salt);
}

}  // namespace tachyon::router
