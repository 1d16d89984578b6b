// The tokenizer of a Hugging Face model folder as GGUF metadata.
//
// tokenizer.json is stored whole under tokenizer.huggingface.json (the GGUF spec's key for
// it); chat_template.jinja (when present) or tokenizer_config.json gives
// tokenizer.chat_template (and tokenizer.chat_template.<name> for named templates from the
// config), tokenizer.ggml.bos_token_id / eos_token_id (bos_token / eos_token
// looked up in tokenizer.json) and tokenizer.ggml.add_bos_token. Readers build the tokenizer
// from tokenizer.huggingface.json (tokenizer::Tokenizer::FromGguf does). A WordPiece
// tokenizer (BERT family) is also written as llama.cpp's "bert" vocabulary
// (tokenizer.ggml.model/tokens/token_type/token_type_count and the cls, separator, padding,
// unknown and mask ids, tokens in its phantom-space spelling), so the file works in llama.cpp
// and in readers that ignore the embedded JSON; other tokenizers get no tokenizer.ggml.tokens.
#pragma once

#include <string>

#include "gguf/gguf.h"
#include "util/status.h"

namespace tachyon::model {

// Adds the keys above for the files of `dir` that exist (none is required). Errors name the
// file and field of malformed JSON.
Status AddHfTokenizerMetadata(const std::string& dir, gguf::GgufWriter* w);

}  // namespace tachyon::model
