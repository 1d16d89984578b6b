// Quantization presets: type choices against llama.cpp's files, and quantized tiny models
// whose logits stay close to F32's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "model/hf_quantize.h"
#include "model/hf_test_util.h"
#include "model/model.h"
#include "model/test_util.h"
#include "util/testing/testdata.h"

namespace tachyon::model {
namespace {

namespace fs = std::filesystem;
using testing::AllLogits;

const std::vector<int32_t> kQuantizeIds = {1, 403, 407, 261, 378, 432, 383, 12, 99, 7};

std::string ModelsDir() {
  const std::string root = TestdataDir();
  return root.empty() || !fs::exists(root + "/models/models") ? "" : root + "/models/models";
}

class QuantizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("hf_quantize_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(QuantPresetTest, Names) {
  ASSERT_TRUE(FindQuantPreset("q4_k_m").has_value());
  EXPECT_EQ(FindQuantPreset("Q4_K_M")->base, GgmlType::kQ4_K);
  EXPECT_EQ(FindQuantPreset("bf16")->file_type, 32u);
  EXPECT_FALSE(FindQuantPreset("Q3_K_XL").has_value());
  EXPECT_NE(QuantPresetNames().find("Q5_K_M"), std::string::npos);
}

TEST(QuantPresetTest, FallbacksForOddRowLengths) {
  const QuantPreset q4km = *FindQuantPreset("Q4_K_M");
  EXPECT_EQ(ChooseQuantType(q4km, "blk.0.attn_q.weight", {96, 64}, 8, false), GgmlType::kQ5_0);
  EXPECT_EQ(ChooseQuantType(q4km, "output.weight", {96, 64}, 8, false), GgmlType::kQ8_0);
  EXPECT_EQ(ChooseQuantType(*FindQuantPreset("Q5_K_M"), "blk.3.ffn_up.weight", {96, 64}, 8, false),
            GgmlType::kQ5_1);
  EXPECT_EQ(ChooseQuantType(*FindQuantPreset("Q8_0"), "blk.0.ffn_up.weight", {48, 64}, 8, false),
            GgmlType::kF16);
  EXPECT_EQ(ChooseQuantType(q4km, "blk.0.attn_norm.weight", {256}, 8, false), GgmlType::kF32);
  EXPECT_EQ(ChooseQuantType(*FindQuantPreset("F16"), "position_embd.weight", {384, 512}, 6, false),
            GgmlType::kF32);  // encoders' tables stay F32, as llama.cpp needs them
  EXPECT_EQ(ChooseQuantType(q4km, "token_types.weight", {384, 2}, 6, false), GgmlType::kF32);
  // 32 layers: use_more_bits picks layers 0-3, 28-31 and every third from 6.
  EXPECT_EQ(ChooseQuantType(q4km, "blk.3.attn_v.weight", {256, 256}, 32, false), GgmlType::kQ6_K);
  EXPECT_EQ(ChooseQuantType(q4km, "blk.4.attn_v.weight", {256, 256}, 32, false), GgmlType::kQ4_K);
  EXPECT_EQ(ChooseQuantType(q4km, "blk.6.ffn_down.weight", {256, 256}, 32, false), GgmlType::kQ6_K);
  EXPECT_EQ(ChooseQuantType(q4km, "blk.7.ffn_down.weight", {256, 256}, 32, false), GgmlType::kQ4_K);
}

// Every llama.cpp-quantized tiny model: the preset picks the same type for every tensor.
TEST(QuantPresetTest, MatchesLlamaCppChoices) {
  const std::string dir = ModelsDir();
  if (dir.empty()) GTEST_SKIP() << "testdata/models not found";
  int checked = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string file = e.path().filename().string();
    for (const char* name : {"Q8_0", "Q4_0", "Q4_K_M", "Q6_K", "F16", "BF16"}) {
      if (!file.ends_with(std::string("-") + name + ".gguf")) continue;
      auto g = gguf::GgufFile::Open(e.path().string());
      ASSERT_TRUE(g.ok());
      const int64_t n_layers = *g->GetInt(g->Architecture() + ".block_count");
      const bool tied = g->FindTensor("output.weight") == nullptr;
      for (const gguf::TensorInfo& t : g->tensors()) {
        EXPECT_EQ(TypeName(ChooseQuantType(*FindQuantPreset(name), t.name, t.dims, n_layers, tied)),
                  TypeName(t.type))
            << file << " " << t.name;
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 5);
}

TEST_F(QuantizeTest, Q8_0LogitsCloseToF32) {
  const std::string dir = ModelsDir();
  if (dir.empty()) GTEST_SKIP() << "testdata/models not found";
  const std::string in = dir + "/tiny-llama-F32.gguf";
  const std::string out = (dir_ / "q8.gguf").string();
  ThreadPool pool(2);
  auto stats = QuantizeModelFile(in, out, *FindQuantPreset("Q8_0"), &pool);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->n_tensors, 21);
  EXPECT_LT(stats->bytes_out * 3, stats->bytes_in);
  auto q = Model::Load(out);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto f = Model::Load(in);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*q)->weights().layers[0].wq.type, GgmlType::kQ8_0);
  EXPECT_EQ((*q)->file().GetInt("general.file_type"), 7);
  EXPECT_EQ((*q)->file().GetString("general.name"), "tiny-llama");  // metadata kept
  EXPECT_EQ((*q)->file().GetArraySize("tokenizer.ggml.tokens"), 512u);
  // Q8_0 is deterministic: every tensor is byte-identical to llama.cpp's quantization.
  auto ref = gguf::GgufFile::Open(dir + "/tiny-llama-Q8_0.gguf");
  ASSERT_TRUE(ref.ok());
  for (const gguf::TensorInfo& t : (*q)->file().tensors()) {
    const gguf::TensorInfo* r = ref->FindTensor(t.name);
    ASSERT_NE(r, nullptr) << t.name;
    ASSERT_EQ(r->type, t.type) << t.name;
    EXPECT_EQ(std::memcmp(ref->TensorData(*r), (*q)->file().TensorData(t), t.nbytes), 0) << t.name;
  }
  const std::vector<float> a = AllLogits(**f, kQuantizeIds, nullptr);
  const std::vector<float> b = AllLogits(**q, kQuantizeIds, nullptr);
  const float diff = testing::MaxAbsDiff(a.data(), b.data(), a.size());
  EXPECT_GT(diff, 0.0f);  // it really was quantized
  EXPECT_LT(diff, 0.05f);
}

TEST_F(QuantizeTest, HfFolderToQ4_K_M) {
  const std::string dir = ModelsDir();
  if (dir.empty()) GTEST_SKIP() << "testdata/models not found";
  auto g = gguf::GgufFile::Open(dir + "/tiny-qwen3-F32.gguf");
  ASSERT_TRUE(g.ok());
  const std::string hf = (dir_ / "qwen3").string();
  testing::HfExportOptions opt;
  opt.matrix_dtype = safetensors::Dtype::kBF16;
  ASSERT_TRUE(testing::ExportHfFolder(*g, hf, opt).ok());
  const std::string out = (dir_ / "q4km.gguf").string();
  auto stats = QuantizeModelFile(hf, out, *FindQuantPreset("Q4_K_M"), nullptr);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  auto q = Model::Load(out);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ((*q)->weights().output.type, GgmlType::kQ6_K);
  EXPECT_EQ((*q)->weights().layers[1].wv.type, GgmlType::kQ6_K);
  EXPECT_EQ((*q)->weights().layers[0].wv.type, GgmlType::kQ4_K);
  EXPECT_EQ((*q)->file().GetInt("general.file_type"), 15);
  auto f = Model::Load(dir + "/tiny-qwen3-F32.gguf");
  ASSERT_TRUE(f.ok());
  const std::vector<float> a = AllLogits(**f, kQuantizeIds, nullptr);
  const std::vector<float> b = AllLogits(**q, kQuantizeIds, nullptr);
  // No further from F32 than llama.cpp's own Q4_K_M file of the same model (plus a margin:
  // the K-quant rounding search differs).
  auto lq = Model::Load(dir + "/tiny-qwen3-Q4_K_M.gguf");
  ASSERT_TRUE(lq.ok());
  const std::vector<float> c = AllLogits(**lq, kQuantizeIds, nullptr);
  const float ours = testing::MaxAbsDiff(a.data(), b.data(), a.size());
  const float theirs = testing::MaxAbsDiff(a.data(), c.data(), a.size());
  EXPECT_LT(ours, 1.5f * theirs) << "llama.cpp's Q4_K_M: " << theirs;
  // No temporary file is left beside the output.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

// Quantize on load gives exactly the model `tachyon quantize` writes (same choices, same
// blocks), for a GGUF file and for an HF folder.
TEST_F(QuantizeTest, QuantizeOnLoadEqualsQuantizedFile) {
  const std::string dir = ModelsDir();
  if (dir.empty()) GTEST_SKIP() << "testdata/models not found";
  auto g = gguf::GgufFile::Open(dir + "/tiny-qwen2-F32.gguf");
  ASSERT_TRUE(g.ok());
  const std::string hf = (dir_ / "qwen2").string();
  testing::HfExportOptions opt;
  opt.matrix_dtype = safetensors::Dtype::kF16;
  ASSERT_TRUE(testing::ExportHfFolder(*g, hf, opt).ok());
  struct Case {
    std::string in, load_name, preset;
    GgmlType wq_type;
  };
  const Case cases[] = {
      {dir + "/tiny-llama-F32.gguf", "q8_0", "Q8_0", GgmlType::kQ8_0},
      {dir + "/tiny-llama-F32.gguf", "Q4_0", "Q4_0", GgmlType::kQ4_0},
      {dir + "/tiny-llama-F32.gguf", "q4_k", "Q4_K_M", GgmlType::kQ4_K},
      {hf, "q8_0", "Q8_0", GgmlType::kQ8_0},
  };
  ThreadPool pool(2);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.in + " " + c.load_name);
    LoadOptions lo;
    lo.quantize = c.load_name;
    lo.threads = 2;
    auto loaded = Model::Load(c.in, lo);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ((*loaded)->weights().layers[0].wq.type, c.wq_type);
    const std::string out = (dir_ / "ref.gguf").string();
    ASSERT_TRUE(QuantizeModelFile(c.in, out, *FindQuantPreset(c.preset), &pool).ok());
    auto file = Model::Load(out);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const std::vector<float> a = AllLogits(**loaded, kQuantizeIds, nullptr);
    const std::vector<float> b = AllLogits(**file, kQuantizeIds, nullptr);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    EXPECT_EQ((*loaded)->weight_bytes(), (*file)->weight_bytes());
  }
}

// Matrices already quantized are kept; 1-D tensors stay F32.
TEST_F(QuantizeTest, QuantizeOnLoadKeepsQuantizedMatrices) {
  const std::string dir = ModelsDir();
  if (dir.empty()) GTEST_SKIP() << "testdata/models not found";
  LoadOptions lo;
  lo.quantize = "q8_0";
  auto q = Model::Load(dir + "/tiny-llama-Q4_0.gguf", lo);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto plain = Model::Load(dir + "/tiny-llama-Q4_0.gguf");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*q)->weights().layers[0].wq.type, GgmlType::kQ4_0);
  const std::vector<float> a = AllLogits(**q, kQuantizeIds, nullptr);
  const std::vector<float> b = AllLogits(**plain, kQuantizeIds, nullptr);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST_F(QuantizeTest, QuantizeOnLoadErrors) {
  LoadOptions lo;
  lo.quantize = "q3_xs";
  auto r = Model::Load((dir_ / "none.gguf").string(), lo);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("q8_0, q4_0, q4_k"), std::string::npos);
  lo.quantize = "q8_0";
  r = Model::Load((dir_ / "none.gguf").string(), lo);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("none.gguf"), std::string::npos) << r.status().message();
  EXPECT_TRUE(FindLoadQuantization("Q4_K").has_value());
  EXPECT_FALSE(FindLoadQuantization("f16").has_value());
}

TEST_F(QuantizeTest, Errors) {
  auto missing = QuantizeModelFile((dir_ / "none.gguf").string(), (dir_ / "o.gguf").string(),
                                   *FindQuantPreset("Q8_0"), nullptr);
  EXPECT_FALSE(missing.ok());
}

}  // namespace
}  // namespace tachyon::model
