#include "spec/drafter.h"

#include <string>

#include "spec/ngram_drafter.h"
#include "spec/suffix_drafter.h"

namespace tachyon::spec {

void Drafter::ProposeScored(int64_t seq_id, std::span<const int32_t> tokens,
                            int64_t num_prompt_tokens, int max_tokens,
                            std::vector<int32_t>* draft, std::vector<double>* accept) {
  Propose(seq_id, tokens, num_prompt_tokens, max_tokens, draft);
  accept->resize(draft->size(), 1.0);
}

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
