// SamplingDefaults: values for sampling parameters a request leaves unset: OpenAI's
// defaults, or the model's generation_config.json (see serving_engine.h). Plain data.
#pragma once

namespace tachyon::engine {

struct SamplingDefaults {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  int max_tokens = 0;  // > 0: default max_tokens (capped by the context); 0: rest of the context
};

}  // namespace tachyon::engine
