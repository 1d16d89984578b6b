// The tiny random-weight models of testdata/models against llama.cpp's logits, for every
// model file listed in index.json that is present, with the README's tolerances.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "model/model.h"
#include "model/test_util.h"
#include "util/testing/testdata.h"

namespace tachyon::model {
namespace {

using testing::AllLogits;
using testing::ReadF32;
using testing::ReadJson;

struct Comparison {
  float max_abs = 0;
  double rms_rel = 0;
  int64_t positions_over = 0;  // positions whose max |d| exceeds the tolerance
};

Comparison Compare(const std::vector<float>& got, const std::vector<float>& want, int64_t n_vocab,
                   double ref_std, float max_abs_tol) {
  Comparison c;
  double sq = 0;
  const int64_t n = static_cast<int64_t>(want.size()) / n_vocab;
  for (int64_t p = 0; p < n; ++p) {
    float pos_max = 0;
    for (int64_t j = 0; j < n_vocab; ++j) {
      const float d = got[p * n_vocab + j] - want[p * n_vocab + j];
      pos_max = std::max(pos_max, std::fabs(d));
      sq += double(d) * d;
    }
    c.max_abs = std::max(c.max_abs, pos_max);
    if (pos_max > max_abs_tol) ++c.positions_over;
  }
  c.rms_rel = std::sqrt(sq / want.size()) / ref_std;
  return c;
}

TEST(ReferenceModelsTest, LogitsMatchLlamaCpp) {
  const std::string root = TestdataDir();
  if (root.empty()) GTEST_SKIP() << "testdata not found (set TACHYON_TESTDATA)";
  const std::string dir = root + "/models";
  if (!std::filesystem::exists(dir + "/index.json")) GTEST_SKIP() << "no testdata/models";
  auto index = ReadJson(dir + "/index.json");
  auto seqs = ReadJson(dir + "/sequences.json")["sequences"];
  const auto& tol = index["tolerances"]["per_type"];
  int models_checked = 0;
  for (const auto& f : index["files"]) {
    const std::string path = dir + "/" + f["path"].get<std::string>();
    if (!std::filesystem::exists(path)) continue;
    const std::string model_name = f["model"], type = f["type"];
    SCOPED_TRACE(path);
    auto m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_TRUE(tol.contains(type)) << "no tolerance for type " << type;
    const float max_abs_tol = tol[type]["max_abs"];
    double rms_tol = tol[type]["rms_rel"];
    const bool moe_rule = (*m)->config().n_experts > 0 && type != "F32" && type != "F16";
    if (moe_rule) rms_tol = index["tolerances"]["moe_rule"]["rms_rel"];
    int seqs_checked = 0;
    for (const auto& lf : index["logits"]) {
      if (lf["model"] != model_name || lf["type"] != type) continue;
      const std::string lpath = dir + "/" + lf["path"].get<std::string>();
      if (!std::filesystem::exists(lpath)) continue;
      const std::vector<int32_t> ids = seqs[lf["seq"].get<std::string>()];
      const std::vector<float> want = ReadF32(lpath);
      const int64_t n_vocab = (*m)->config().n_vocab;
      ASSERT_EQ(want.size(), ids.size() * n_vocab) << lpath;
      const std::vector<float> got = AllLogits(**m, ids, nullptr);
      const Comparison c = Compare(got, want, n_vocab, lf["std"], max_abs_tol);
      const int64_t n = static_cast<int64_t>(ids.size());
      const int64_t allowed_over = moe_rule ? std::max<int64_t>(1, n / 10) : 0;
      EXPECT_LE(c.positions_over, allowed_over)
          << lpath << ": max |d| " << c.max_abs << " > " << max_abs_tol << " at "
          << c.positions_over << " positions";
      EXPECT_LE(c.rms_rel, rms_tol) << lpath;
      ++seqs_checked;
    }
    EXPECT_GT(seqs_checked, 0) << "no logits files for " << path;
    ++models_checked;
  }
  if (models_checked == 0) GTEST_SKIP() << "no model files present in " << dir;
}

// The reduced-precision KV caches on the F32 models: llama.cpp's logits were computed with
// an F32 KV cache, so these tolerances (max |d|, rms(d) / std) bound what rounding K/V to
// the dtype costs. Measured worst cases are printed; see docs/attention.md. The MoE model
// follows the README's MoE rule (rounding can flip near-tie routing decisions): max |d| may
// be exceeded at max(1, n/10) positions, rms within moe_rule.rms_rel.
TEST(ReferenceModelsTest, KvDtypesStayCloseToLlamaCpp) {
  const std::string root = TestdataDir();
  if (root.empty()) GTEST_SKIP() << "testdata not found (set TACHYON_TESTDATA)";
  const std::string dir = root + "/models";
  if (!std::filesystem::exists(dir + "/index.json")) GTEST_SKIP() << "no testdata/models";
  auto index = ReadJson(dir + "/index.json");
  auto seqs = ReadJson(dir + "/sequences.json")["sequences"];
  struct Tol {
    KvDtype dtype;
    float max_abs;
    double rms_rel;
  };
  const Tol tols[] = {
      {KvDtype::kF16, 2e-3f, 1e-3}, {KvDtype::kBf16, 1.5e-2f, 1e-2}, {KvDtype::kQ8_0, 4e-2f, 2e-2}};
  int models_checked = 0;
  for (const auto& f : index["files"]) {
    const std::string path = dir + "/" + f["path"].get<std::string>();
    if (f["type"] != "F32" || !std::filesystem::exists(path)) continue;
    SCOPED_TRACE(path);
    auto m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const int64_t n_vocab = (*m)->config().n_vocab;
    const bool moe = (*m)->config().n_experts > 0;
    for (const Tol& t : tols) {
      float worst_abs = 0;
      double worst_rms = 0;
      const double rms_tol =
          moe ? index["tolerances"]["moe_rule"]["rms_rel"].get<double>() : t.rms_rel;
      for (const auto& lf : index["logits"]) {
        // S4 only (200 tokens over 13 blocks): the longest context, and keeps the test fast.
        if (lf["model"] != f["model"] || lf["type"] != "F32" || lf["seq"] != "S4") continue;
        const std::string lpath = dir + "/" + lf["path"].get<std::string>();
        if (!std::filesystem::exists(lpath)) continue;
        const std::vector<int32_t> ids = seqs[lf["seq"].get<std::string>()];
        const std::vector<float> want = ReadF32(lpath);
        ASSERT_EQ(want.size(), ids.size() * n_vocab) << lpath;
        const std::vector<float> got = AllLogits(**m, ids, nullptr, kDefaultBlockSize, t.dtype);
        const Comparison c = Compare(got, want, n_vocab, lf["std"], t.max_abs);
        const int64_t n = static_cast<int64_t>(ids.size());
        EXPECT_LE(c.positions_over, moe ? std::max<int64_t>(1, n / 10) : 0)
            << kernels::KvDtypeName(t.dtype) << " " << lpath << ": max |d| " << c.max_abs;
        worst_abs = std::max(worst_abs, c.max_abs);
        worst_rms = std::max(worst_rms, c.rms_rel);
      }
      EXPECT_LE(worst_rms, rms_tol) << kernels::KvDtypeName(t.dtype);
      std::printf("%s KV %s: max |d| %.2e, rms/std %.2e\n", f["model"].get<std::string>().c_str(),
                  kernels::KvDtypeName(t.dtype), worst_abs, worst_rms);
    }
    ++models_checked;
  }
  if (models_checked == 0) GTEST_SKIP() << "no F32 model files present in " << dir;
}

}  // namespace
}  // namespace tachyon::model

namespace tachyon::model {
namespace {

// The paths of the model files of testdata/models/index.json that are present; empty with
// `why` set when there are none.
std::vector<std::string> PresentModelFiles(std::string* why) {
  const std::string root = TestdataDir();
  if (root.empty()) {
    *why = "testdata not found (set TACHYON_TESTDATA)";
    return {};
  }
  const std::string dir = root + "/models";
  if (!std::filesystem::exists(dir + "/index.json")) {
    *why = "no testdata/models";
    return {};
  }
  const auto index = ReadJson(dir + "/index.json");
  std::vector<std::string> paths;
  for (const auto& f : index["files"]) {
    const std::string path = dir + "/" + f["path"].get<std::string>();
    if (std::filesystem::exists(path)) paths.push_back(path);
  }
  if (paths.empty()) *why = "no model files present in " + dir;
  return paths;
}

// The matmul work per token (the int8 roofline of `tachyon bench`) from the config's shapes,
// for every dense and mixture-of-experts model of testdata/models.
TEST(ReferenceModelsTest, MatMulMacsPerTokenFollowsTheShapes) {
  std::string why;
  const std::vector<std::string> paths = PresentModelFiles(&why);
  if (paths.empty()) GTEST_SKIP() << why;
  int checked_dense = 0, checked_moe = 0;
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    auto m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status().message();
    const ModelConfig& c = (*m)->config();
    const bool moe = c.n_experts > 0;  // every layer of the MoE architectures is MoE
    const uint64_t attn = 2 * c.n_embd * c.q_dim() + 2 * c.n_embd * c.kv_dim();
    const uint64_t ffn = moe ? c.n_embd * c.n_experts + c.n_experts_used * 3 * c.n_embd * c.n_ff_expert
                             : 3 * c.n_embd * c.n_ff;
    EXPECT_EQ((*m)->matmul_macs_per_token(),
              static_cast<uint64_t>(c.n_vocab * c.n_embd) + c.n_layers * (attn + ffn));
    ++(moe ? checked_moe : checked_dense);
  }
  EXPECT_GT(checked_dense, 0);
  EXPECT_GT(checked_moe, 0);
}

// The fused matmul inputs (norms and SiLU x up inside the matmuls' activation conversion,
// Model::SetFusedInputs) give the same logits bit for bit as the separate passes, for every
// model of testdata/models (dense, MoE, each weight type), threaded, at a prompt length that
// takes the batched kernels.
TEST(ReferenceModelsTest, FusedInputsGiveTheSameLogits) {
  std::string why;
  const std::vector<std::string> paths = PresentModelFiles(&why);
  if (paths.empty()) GTEST_SKIP() << why;
  ThreadPool pool(2);
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    auto m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status().message();
    std::vector<int32_t> ids;
    for (int i = 0; i < 24; ++i) ids.push_back((i * 29 + 3) % static_cast<int>((*m)->config().n_vocab));
    (*m)->SetFusedInputs(false);
    const std::vector<float> want = AllLogits(**m, ids, &pool);
    (*m)->SetFusedInputs(true);
    const std::vector<float> got = AllLogits(**m, ids, &pool);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "at " << i;
  }
}

}  // namespace
}  // namespace tachyon::model
