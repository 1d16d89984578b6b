// Per-op wall-time profile of Model::Forward, enabled by the environment variable
// TACHYON_PROFILE=1 (read once). When disabled, each timed region costs one null check.
//
//   setenv TACHYON_PROFILE=1; ... model->ResetProfile(); model->Forward(...);
//   std::printf("%s", FormatProfile(model->profile(), "decode").c_str());
//
// Thread-safety: a profile is written by the thread that runs Forward (the timed regions
// wrap whole multi-threaded ops, so they measure wall time including the join).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tachyon::model {

enum class OpKind : int {
  kEmbed,       // token embedding lookup (dequantize rows)
  kRmsNorm,     // attention / FFN norms (with the residual add) when not fused into a matmul
  kMatMulQkv,   // wq, wk, wv (their fused input norm, biases, q/k norms)
  kRope,        // rotary embedding of q and k
  kAttention,   // storing K/V in the cache + paged attention
  kMatMulO,     // wo
  kFfnMatMul,   // gate, up, down (their fused norm and SiLU x up; the MoE router)
  kActivation,  // SiLU(gate) * up when not fused into the down matmul
  kLogits,      // output norm + matmul
  kOther,       // everything else inside Forward (validation, residual adds, gathers)
  kCount,
};
inline constexpr int kNumOpKinds = static_cast<int>(OpKind::kCount);
const char* OpKindName(OpKind op);

struct OpProfile {
  double seconds[kNumOpKinds] = {};
  double total_seconds = 0;  // whole Forward calls
  int64_t forwards = 0;
  int64_t tokens = 0;
  void Reset() { *this = OpProfile(); }
};

// True when TACHYON_PROFILE is set to a value other than "" or "0".
bool ProfilingEnabled();

// A table: one line per op kind with ms per Forward and share of the total; `title` heads it.
std::string FormatProfile(const OpProfile& p, const std::string& title);

// Adds the wall time of its scope to p->seconds[op]; does nothing when p is null.
class OpTimer {
 public:
  OpTimer(OpProfile* p, OpKind op) : p_(p), op_(op) {
    if (p_) t0_ = std::chrono::steady_clock::now();
  }
  ~OpTimer() {
    if (p_) {
      p_->seconds[static_cast<int>(op_)] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    }
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  OpProfile* p_;
  OpKind op_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace tachyon::model
