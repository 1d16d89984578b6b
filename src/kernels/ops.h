// Elementwise and row-wise ops of a transformer layer. Each has a scalar reference (in
// ops_ref.cc, named *Reference) and SIMD variants picked at run time; tests compare them.
// Shapes are in comments: [rows, cols] row-major float32 unless stated.
#pragma once

#include <cstdint>

namespace tachyon::kernels {

// out[i, :] = x[i, :] / sqrt(mean(x[i, :]^2) + eps) * weight[:]   x, out: [m, n]; weight: [n]
// out may alias x.
void RmsNorm(const float* x, const float* weight, float* out, int64_t m, int64_t n, float eps);

// Fused residual add + RmsNorm, one read of x for both: x[i, :] += delta[i, :], then
// out[i, :] = RmsNorm(x[i, :]) * weight.  x, delta, out: [m, n]; out must not alias x/delta.
void AddRmsNorm(float* x, const float* delta, const float* weight, float* out, int64_t m, int64_t n,
                float eps);

enum class RopeStyle {
  kAdjacent,  // rotates pairs (2i, 2i+1): GGUF "llama" layout
  kNeox,      // rotates pairs (i, i + rot_dim/2): qwen2/qwen3 ("NEOX")
};

// Rotates, in place, the first `rot_dim` dims of each of n_heads heads of one token at
// position `pos`. x: [n_heads, head_dim]. inv_freq: [rot_dim / 2], the angle per position
// of each pair (theta^(-2i/rot_dim), already divided by any rope_freqs factors).
void Rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos,
          const float* inv_freq, RopeStyle style);

// RoPE of one token's queries and keys at `pos` in one pass: the cos/sin of each pair are
// computed once for both. q: [n_heads, head_dim], k: [n_kv_heads, head_dim], in place.
void RopeQk(float* q, int64_t n_heads, float* k, int64_t n_kv_heads, int64_t head_dim,
            int64_t rot_dim, int64_t pos, const float* inv_freq, RopeStyle style);

// The rotations RoPE applies at `pos`, rot_dim floats: cs[i] = cos(pos * inv_freq[i]) and
// cs[rot_dim / 2 + i] = sin(...) for i < rot_dim / 2, angles in double (what Rope / RopeQk
// compute per call).
void RopeCosSin(int64_t pos, int64_t rot_dim, const float* inv_freq, float* cs);

// RopeQk with the pairs of RopeCosSin precomputed (the same results bit for bit): a forward
// step computes them once per token for all layers.
void RopeQkCached(float* q, int64_t n_heads, float* k, int64_t n_kv_heads, int64_t head_dim,
                  int64_t rot_dim, const float* cs, RopeStyle style);

// out[i] = silu(gate[i]) * up[i], silu(v) = v / (1 + exp(-v)). out may alias gate or up.
void SiluMul(const float* gate, const float* up, float* out, int64_t n);

// out[i] = gelu_tanh(gate[i]) * up[i] (GeGLU), gelu_tanh(v) = 0.5 v (1 + tanh(sqrt(2/pi)
// (v + 0.044715 v^3))), the tanh approximation Gemma uses. out may alias gate or up.
void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n);

// The activation of a gated FFN: out = act(gate) * up.
enum class GatedAct {
  kSilu,      // SwiGLU (SiluMul)
  kGeluTanh,  // GeGLU with the tanh GELU (GeluTanhMul)
};
void GatedMul(GatedAct act, const float* gate, const float* up, float* out, int64_t n);

// In-place softmax over x[0..n).
void Softmax(float* x, int64_t n);

// y[i] += x[i]
void AddInPlace(float* y, const float* x, int64_t n);

// out[j] = sum_i x[i] * y[i] over n floats
float Dot(const float* x, const float* y, int64_t n);

// Scalar references (ops_ref.cc): same contracts, double accumulation where it matters.
void RmsNormReference(const float* x, const float* weight, float* out, int64_t m, int64_t n,
                      float eps);
void AddRmsNormReference(float* x, const float* delta, const float* weight, float* out, int64_t m,
                         int64_t n, float eps);
void RopeReference(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos,
                   const float* inv_freq, RopeStyle style);
void SiluMulReference(const float* gate, const float* up, float* out, int64_t n);
void GeluTanhMulReference(const float* gate, const float* up, float* out, int64_t n);
void SoftmaxReference(float* x, int64_t n);
void AddInPlaceReference(float* y, const float* x, int64_t n);
float DotReference(const float* x, const float* y, int64_t n);

}  // namespace tachyon::kernels
