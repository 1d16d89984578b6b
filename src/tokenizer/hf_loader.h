// Internal: builds a Pipeline from Hugging Face tokenizer.json (+ tokenizer_config.json).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/pipeline.h"
#include "util/status.h"

namespace tachyon::tokenizer {

Result<std::unique_ptr<Pipeline>> LoadHfTokenizer(std::string_view tokenizer_json,
                                                  std::string_view config_json,
                                                  const std::string& name);

}  // namespace tachyon::tokenizer
