#include "model/profile.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tachyon::model {

const char* OpKindName(OpKind op) {
  switch (op) {
    case OpKind::kEmbed:
      return "embed";
    case OpKind::kRmsNorm:
      return "rmsnorm (+residual add; unfused)";
    case OpKind::kMatMulQkv:
      return "matmul qkv (+fused rmsnorm)";
    case OpKind::kRope:
      return "rope";
    case OpKind::kAttention:
      return "attention (+kv store)";
    case OpKind::kMatMulO:
      return "matmul o";
    case OpKind::kFfnMatMul:
      return "ffn matmuls (+fused rmsnorm, silu*up)";
    case OpKind::kActivation:
      return "activation (silu*up; unfused)";
    case OpKind::kLogits:
      return "logits (output norm + matmul)";
    case OpKind::kOther:
      return "other";
    case OpKind::kCount:
      break;
  }
  return "?";
}

bool ProfilingEnabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("TACHYON_PROFILE");
    return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

std::string FormatProfile(const OpProfile& p, const std::string& title) {
  std::string out;
  char line[160];
  const double n = p.forwards > 0 ? static_cast<double>(p.forwards) : 1.0;
  std::snprintf(line, sizeof line, "%s: %lld forward(s), %lld token(s), %.3f ms per forward\n",
                title.c_str(), static_cast<long long>(p.forwards), static_cast<long long>(p.tokens),
                1e3 * p.total_seconds / n);
  out += line;
  out += "| op | ms / forward | share |\n|---|---:|---:|\n";
  for (int i = 0; i < kNumOpKinds; ++i) {
    const double s = p.seconds[i];
    std::snprintf(line, sizeof line, "| %s | %.3f | %.1f%% |\n", OpKindName(static_cast<OpKind>(i)),
                  1e3 * s / n, p.total_seconds > 0 ? 100.0 * s / p.total_seconds : 0.0);
    out += line;
  }
  return out;
}

}  // namespace tachyon::model
