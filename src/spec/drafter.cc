#include "spec/drafter.h"

#include <string>

#include "spec/ngram_drafter.h"
#include "spec/suffix_drafter.h"

namespace tachyon::spec {

Result<std::unique_ptr<Drafter>> MakeDrafter(const SpeculativeConfig& config) {
  RETURN_IF_ERROR(ValidateSpeculativeConfig(config));
  if (config.method == SpecMethod::kNgram) {
    return std::unique_ptr<Drafter>(
        new NgramDrafter(config.prompt_lookup_min, config.prompt_lookup_max));
  }
  if (config.method == SpecMethod::kSuffix) {
    return std::unique_ptr<Drafter>(new SuffixDrafter(config.suffix));
  }
  return InvalidArgument("speculative config: no drafter for method \"" +
                         std::string(SpecMethodName(config.method)) + "\"");
}

}  // namespace tachyon::spec
