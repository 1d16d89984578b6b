// Internal: builds a Pipeline from a GGUF file's tokenizer.ggml.* metadata.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pipeline.h"
#include "util/status.h"

namespace tachyon::gguf {
class GgufFile;
}

namespace tachyon::tokenizer {

Result<std::unique_ptr<Pipeline>> LoadGgufTokenizer(const gguf::GgufFile& file);

// Split patterns (applied in sequence, each Isolated) of a GGUF tokenizer.ggml.pre value, and
// whether that tokenizer skips merges for pieces that are whole tokens. Unimplemented for an
// unknown value.
Status GgufPreTokenizerPatterns(std::string_view pre, std::vector<std::string>* patterns,
                                bool* ignore_merges);

}  // namespace tachyon::tokenizer
