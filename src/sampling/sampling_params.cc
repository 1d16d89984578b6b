#include "sampling/sampling_params.h"

#include <cmath>
#include <string>

namespace tachyon::sampling {
namespace {
bool Finite(float x) {
  return std::isfinite(x);
}
}  // namespace

Status SamplingParams::Validate(int n_vocab) const {
  if (n < 1) return InvalidArgument("n must be at least 1, got " + std::to_string(n));
  if (!Finite(temperature) || temperature < 0) {
    return InvalidArgument("temperature must be >= 0, got " + std::to_string(temperature));
  }
  if (!Finite(top_p) || top_p <= 0 || top_p > 1) {
    return InvalidArgument("top_p must be in (0, 1], got " + std::to_string(top_p));
  }
  if (!Finite(min_p) || min_p < 0 || min_p > 1) {
    return InvalidArgument("min_p must be in [0, 1], got " + std::to_string(min_p));
  }
  if (!Finite(repetition_penalty) || repetition_penalty <= 0) {
    return InvalidArgument("repetition_penalty must be > 0, got " +
                           std::to_string(repetition_penalty));
  }
  if (!Finite(presence_penalty) || presence_penalty < -2 || presence_penalty > 2) {
    return InvalidArgument("presence_penalty must be in [-2, 2]");
  }
  if (!Finite(frequency_penalty) || frequency_penalty < -2 || frequency_penalty > 2) {
    return InvalidArgument("frequency_penalty must be in [-2, 2]");
  }
  if (max_tokens == 0) return InvalidArgument("max_tokens must be at least 1");
  if (min_tokens < 0) return InvalidArgument("min_tokens must be >= 0");
  if (output_offset < 0) return InvalidArgument("output_offset must be >= 0");
  if (max_tokens > 0 && min_tokens > max_tokens) {
    return InvalidArgument("min_tokens must not exceed max_tokens");
  }
  if (logprobs > kMaxLogprobs) {
    return InvalidArgument("logprobs must be at most " + std::to_string(kMaxLogprobs));
  }
  for (const auto& [tok, bias] : logit_bias) {
    if (tok < 0 || tok >= n_vocab) {
      return InvalidArgument("logit_bias token id " + std::to_string(tok) + " out of range");
    }
    if (!Finite(bias)) return InvalidArgument("logit_bias values must be finite");
  }
  for (int32_t tok : stop_token_ids) {
    if (tok < 0 || tok >= n_vocab) {
      return InvalidArgument("stop_token_ids id " + std::to_string(tok) + " out of range");
    }
  }
  for (const std::string& s : stop) {
    if (s.empty()) return InvalidArgument("stop strings must not be empty");
  }
  return OkStatus();
}

}  // namespace tachyon::sampling
