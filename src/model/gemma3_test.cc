// Gemma 3 wiring on a random-weight file (model/synth, F32): Model::Forward against a dense
// forward written here from the definition (embedding scale, q/k norms, NEOX RoPE with the
// local base on sliding layers and the global one elsewhere, sliding-window mask, pre/post
// norms, GeGLU, tied output, final soft-cap), double precision throughout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <numbers>

#include "gguf/gguf.h"
#include "model/model.h"
#include "model/synth.h"
#include "model/test_util.h"

namespace tachyon::model {
namespace {

using testing::AllLogits;
using Vec = std::vector<double>;

class Reference {
 public:
  explicit Reference(const gguf::GgufFile& f) : f_(f) {}

  // Logits [n, n_vocab] of `ids` at positions 0..n-1; window 0 turns the sliding mask off.
  std::vector<float> Logits(const ModelConfig& c, const std::vector<int32_t>& ids, int64_t window) {
    const int64_t n = static_cast<int64_t>(ids.size()), d = c.n_embd, hd = c.head_dim;
    std::vector<Vec> x(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = Row("token_embd.weight", ids[i], d);
      for (double& v : x[i]) v *= std::sqrt(static_cast<double>(d));
    }
    for (int64_t il = 0; il < c.n_layers; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      const bool sliding = il % 2 == 0;  // synth's pattern 2
      const double base = sliding ? 10000.0 : 1e6;
      std::vector<Vec> q(n), k(n), v(n);
      for (int64_t i = 0; i < n; ++i) {
        const Vec xn = Norm(x[i], p + "attn_norm.weight");
        q[i] = MatVec(p + "attn_q.weight", xn);
        k[i] = MatVec(p + "attn_k.weight", xn);
        v[i] = MatVec(p + "attn_v.weight", xn);
        HeadNormRope(&q[i], c.n_heads, hd, p + "attn_q_norm.weight", i, base);
        HeadNormRope(&k[i], c.n_kv_heads, hd, p + "attn_k_norm.weight", i, base);
      }
      const int64_t group = c.n_heads / c.n_kv_heads;
      for (int64_t i = 0; i < n; ++i) {
        Vec attn(c.n_heads * hd, 0.0);
        for (int64_t h = 0; h < c.n_heads; ++h) {
          const int64_t kh = h / group;
          const int64_t first = sliding && window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
          Vec s;
          double mx = -1e300;
          for (int64_t j = first; j <= i; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < hd; ++e) dot += q[i][h * hd + e] * k[j][kh * hd + e];
            s.push_back(dot / std::sqrt(static_cast<double>(hd)));
            mx = std::max(mx, s.back());
          }
          double sum = 0;
          for (double& e : s) sum += (e = std::exp(e - mx));
          for (int64_t j = first; j <= i; ++j) {
            for (int64_t e = 0; e < hd; ++e) {
              attn[h * hd + e] += s[j - first] / sum * v[j][kh * hd + e];
            }
          }
        }
        Add(&x[i], Norm(MatVec(p + "attn_output.weight", attn), p + "post_attention_norm.weight"));
        const Vec xn = Norm(x[i], p + "ffn_norm.weight");
        const Vec g = MatVec(p + "ffn_gate.weight", xn), u = MatVec(p + "ffn_up.weight", xn);
        Vec h(g.size());
        for (size_t e = 0; e < g.size(); ++e) {
          const double t = std::sqrt(2 / std::numbers::pi) * (g[e] + 0.044715 * g[e] * g[e] * g[e]);
          h[e] = 0.5 * g[e] * (1 + std::tanh(t)) * u[e];
        }
        Add(&x[i], Norm(MatVec(p + "ffn_down.weight", h), p + "post_ffw_norm.weight"));
      }
    }
    std::vector<float> logits;
    for (int64_t i = 0; i < n; ++i) {
      const Vec l = MatVec("token_embd.weight", Norm(x[i], "output_norm.weight"));
      for (double e : l) {
        logits.push_back(
            static_cast<float>(kSynthGemmaSoftcap * std::tanh(e / kSynthGemmaSoftcap)));
      }
    }
    return logits;
  }

 private:
  const float* Data(const std::string& name, int64_t* cols = nullptr, int64_t* rows = nullptr) {
    const gguf::TensorInfo* t = f_.FindTensor(name);
    EXPECT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, GgmlType::kF32) << name;
    if (cols) *cols = t->dims[0];
    if (rows) *rows = t->dims.size() > 1 ? t->dims[1] : 1;
    return reinterpret_cast<const float*>(f_.TensorData(*t));
  }
  Vec Row(const std::string& name, int64_t r, int64_t cols) {
    const float* w = Data(name);
    return Vec(w + r * cols, w + (r + 1) * cols);
  }
  Vec MatVec(const std::string& name, const Vec& in) {
    int64_t cols = 0, rows = 0;
    const float* w = Data(name, &cols, &rows);
    EXPECT_EQ(cols, static_cast<int64_t>(in.size())) << name;
    Vec out(rows, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) out[r] += w[r * cols + c] * in[c];
    }
    return out;
  }
  // RmsNorm of in[off, off + n) with weight `name` (eps 1e-5, synth's).
  Vec Norm(const Vec& in, const std::string& name, size_t off = 0, size_t n = 0) {
    if (n == 0) n = in.size();
    const float* w = Data(name);
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += in[off + i] * in[off + i];
    const double sc = 1 / std::sqrt(ss / static_cast<double>(n) + 1e-5);
    Vec out(n);
    for (size_t i = 0; i < n; ++i) out[i] = in[off + i] * sc * w[i];
    return out;
  }
  void HeadNormRope(Vec* x, int64_t heads, int64_t hd, const std::string& norm, int64_t pos,
                    double base) {
    for (int64_t h = 0; h < heads; ++h) {
      Vec y = Norm(*x, norm, h * hd, hd);
      for (int64_t i = 0; i < hd / 2; ++i) {  // NEOX: pairs (i, i + hd/2)
        const double a = pos * std::pow(base, -2.0 * i / hd);
        const double x0 = y[i], x1 = y[i + hd / 2];
        y[i] = x0 * std::cos(a) - x1 * std::sin(a);
        y[i + hd / 2] = x0 * std::sin(a) + x1 * std::cos(a);
      }
      std::copy(y.begin(), y.end(), x->begin() + h * hd);
    }
  }
  static void Add(Vec* x, const Vec& y) {
    for (size_t i = 0; i < x->size(); ++i) (*x)[i] += y[i];
  }

  const gguf::GgufFile& f_;
};

TEST(Gemma3, ForwardMatchesDenseReference) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tachyon_gemma3_" + std::to_string(getpid()) + ".gguf"))
                               .string();
  SynthOptions o;
  o.arch = "gemma3";
  o.type = "F32";
  o.seed = 3;
  ASSERT_TRUE(WriteSynthModel(o, path, nullptr).ok());
  struct Remove {
    std::string p;
    ~Remove() { std::filesystem::remove(p); }
  } remove{path};
  auto m = Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ(c.sliding_window, kSynthGemmaWindow);
  EXPECT_TRUE(c.IsSlidingLayer(0));
  EXPECT_FALSE(c.IsSlidingLayer(1));
  EXPECT_EQ(c.ffn_act, kernels::GatedAct::kGeluTanh);

  std::vector<int32_t> ids;
  for (int i = 0; i < 21; ++i) ids.push_back((i * 53 + 7) % 512);  // longer than the window
  ThreadPool pool(2);
  const std::vector<float> got = AllLogits(**m, ids, &pool);
  Reference ref((*m)->file());
  const std::vector<float> want = ref.Logits(c, ids, kSynthGemmaWindow);
  ASSERT_EQ(got.size(), want.size());
  const float diff = testing::MaxAbsDiff(got.data(), want.data(), got.size());
  EXPECT_LT(diff, 2e-3f);
  // The window matters at these positions: ignoring it is far off.
  const std::vector<float> full = ref.Logits(c, ids, 0);
  EXPECT_GT(testing::MaxAbsDiff(full.data(), want.data(), full.size()), 50 * diff);
}

TEST(Gemma3, BadPatternIsRejected) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tachyon_gemma3_bad_" + std::to_string(getpid()) + ".gguf"))
                               .string();
  SynthOptions o;
  o.arch = "gemma3";
  o.type = "Q8_0";
  ASSERT_TRUE(WriteSynthModel(o, path, nullptr).ok());
  auto f = gguf::GgufFile::Open(path);
  ASSERT_TRUE(f.ok());
  gguf::GgufWriter w;
  for (const auto& [k, v] : f->metadata()) w.Set(k, v);
  w.Set("gemma3.attention.sliding_window_pattern", gguf::Value::Uint32(0));
  for (const auto& t : f->tensors()) {
    ASSERT_TRUE(w.AddTensor(t.name, t.type, t.dims, f->TensorData(t), t.nbytes).ok());
  }
  const std::string bad = path + ".bad.gguf";
  ASSERT_TRUE(w.WriteFile(bad).ok());
  auto m = Model::Load(bad);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("sliding_window_pattern"), std::string::npos)
      << m.status().message();
  std::filesystem::remove(path);
  std::filesystem::remove(bad);
}

}  // namespace
}  // namespace tachyon::model
