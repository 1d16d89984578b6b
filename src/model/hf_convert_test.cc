// HF folders -> Model: tiny GGUF reference models exported to HF layout (inverting the Q/K
// permutation) must load through the HF path and give the GGUF path's logits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "model/hf_config.h"
#include "model/hf_convert.h"
#include "model/hf_load.h"
#include "model/hf_test_util.h"
#include "model/model.h"
#include "model/synth.h"
#include "model/test_util.h"
#include "util/testing/testdata.h"

namespace tachyon::model {
namespace {

namespace fs = std::filesystem;
using testing::AllLogits;
using testing::ExportHfFolder;
using testing::HfExportOptions;
using testing::MaxAbsDiff;

const std::vector<int32_t> kIds = {1, 403, 407, 261, 378, 432, 383, 12, 99, 7};

std::string ModelPath(const std::string& name) {
  const std::string root = TestdataDir();
  if (root.empty()) return "";
  const std::string p = root + "/models/models/" + name;
  return fs::exists(p) ? p : "";
}

class HfConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("hf_convert_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Loads `gguf_name` both ways and returns the max |logit difference|.
  void CheckSameLogits(const std::string& gguf_name, const HfExportOptions& opt, float tol,
                       GgmlType want_matrix_type) {
    const std::string path = ModelPath(gguf_name);
    if (path.empty()) GTEST_SKIP() << "testdata model " << gguf_name << " not found";
    CheckSameLogitsAt(path, gguf_name, opt, tol, want_matrix_type);
  }
  void CheckSameLogitsAt(const std::string& path, const std::string& gguf_name,
                         const HfExportOptions& opt, float tol, GgmlType want_matrix_type) {
    auto file = gguf::GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const std::string hf = (dir_ / gguf_name).string();
    Status st = ExportHfFolder(*file, hf, opt);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE(IsHfModelFolder(hf));
    auto ref = Model::Load(path);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    auto got = Model::Load(hf);  // a folder with config.json goes through LoadHfModel
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ((*got)->config().arch, (*ref)->config().arch);
    EXPECT_EQ((*got)->config().tied_output, (*ref)->config().tied_output);
    EXPECT_EQ((*got)->weights().layers[0].wq.type, want_matrix_type);
    const std::vector<float> a = AllLogits(**ref, kIds, nullptr);
    const std::vector<float> b = AllLogits(**got, kIds, nullptr);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_LE(MaxAbsDiff(a.data(), b.data(), a.size()), tol) << gguf_name;
  }

  fs::path dir_;
};

TEST_F(HfConvertTest, LlamaF32SameLogits) {
  CheckSameLogits("tiny-llama-F32.gguf", {}, 0.0f, GgmlType::kF32);
}
TEST_F(HfConvertTest, Qwen2F32SameLogits) {  // biases, tied embeddings
  CheckSameLogits("tiny-qwen2-F32.gguf", {}, 0.0f, GgmlType::kF32);
}
TEST_F(HfConvertTest, Qwen3F32ShardedSameLogits) {  // q/k norms, head_dim, 3 shards
  HfExportOptions opt;
  opt.n_shards = 3;
  CheckSameLogits("tiny-qwen3-F32.gguf", opt, 0.0f, GgmlType::kF32);
}
TEST_F(HfConvertTest, Llama3RopeScalingFromConfig) {
  HfExportOptions opt;
  opt.rope_scaling = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                      {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  CheckSameLogits("tiny-llama3rope-F32.gguf", opt, 1e-4f, GgmlType::kF32);
}
// Gemma 3: renamed norms stored as w - 1, layer_types, rope_local_base_freq,
// query_pre_attn_scalar, final_logit_softcapping (a synth file: testdata has no gemma3).
TEST_F(HfConvertTest, Gemma3F32SameLogits) {
  SynthOptions o;
  o.arch = "gemma3";
  o.type = "F32";
  const std::string path = (dir_ / "synth-gemma3.gguf").string();
  ASSERT_TRUE(WriteSynthModel(o, path, nullptr).ok());
  CheckSameLogitsAt(path, "synth-gemma3", {}, 1e-4f, GgmlType::kF32);
  auto hf = ReadHfConfig((dir_ / "synth-gemma3" / "config.json").string());
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  EXPECT_EQ(hf->gguf_arch, "gemma3");
  EXPECT_EQ(hf->swa_pattern, 2);
  EXPECT_EQ(hf->sliding_window, kSynthGemmaWindow);
  EXPECT_EQ(hf->final_logit_softcap, kSynthGemmaSoftcap);
}

TEST(HfConfigTest, Gemma3LayerTypesMustBePeriodic) {
  const std::string base = R"({"architectures": ["Gemma3ForCausalLM"], "hidden_size": 64,
      "num_hidden_layers": 3, "num_attention_heads": 2, "intermediate_size": 128,
      "sliding_window": 4, "layer_types": )";
  auto ok = ParseHfConfig(
      base + R"(["sliding_attention", "full_attention", "sliding_attention"]})", "config.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->swa_pattern, 2);
  EXPECT_TRUE(ok->tie_embeddings);
  auto bad = ParseHfConfig(
      base + R"(["full_attention", "sliding_attention", "sliding_attention"]})", "config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layer_types"), std::string::npos);
}

TEST_F(HfConvertTest, BF16AndF16KeepTheirType) {
  HfExportOptions opt;
  opt.matrix_dtype = safetensors::Dtype::kBF16;
  CheckSameLogits("tiny-llama-F32.gguf", opt, 0.05f, GgmlType::kBF16);
  opt.matrix_dtype = safetensors::Dtype::kF16;
  CheckSameLogits("tiny-qwen2-F32.gguf", opt, 0.01f, GgmlType::kF16);
}

TEST(HfPermuteTest, InverseRoundTrips) {
  std::vector<float> rows(2 * 8), p(rows.size()), back(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = float(i);
  auto u8 = [](std::vector<float>& v) { return reinterpret_cast<uint8_t*>(v.data()); };
  PermuteQkRows(u8(rows), u8(p), 2, 8, 4, false);
  // Head 0: HF rows (0,4),(1,5),(2,6),(3,7) become adjacent pairs.
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[1], 4);
  EXPECT_EQ(p[2], 1);
  EXPECT_EQ(p[3], 5);
  EXPECT_EQ(p[8], 8);
  EXPECT_EQ(p[9], 12);
  PermuteQkRows(u8(p), u8(back), 2, 8, 4, true);
  EXPECT_EQ(back, rows);
}

TEST(HfConfigTest, ParsesFields) {
  auto c = ParseHfConfig(R"({"architectures":["MistralForCausalLM"],"hidden_size":64,
      "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
      "intermediate_size":128,"sliding_window":4096,"rope_theta":1e6,"rms_norm_eps":1e-5,
      "rope_scaling":null})", "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->gguf_arch, "llama");
  EXPECT_TRUE(c->permute_qk);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->n_kv_heads, 2);
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  gguf::GgufWriter w;
  SetGgufHyperparameters(*c, &w);
  const std::string bytes = w.Serialize();
  auto g = gguf::GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "x");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->GetInt("llama.attention.sliding_window"), 4096);
  EXPECT_EQ(g->GetInt("llama.attention.head_count_kv"), 2);
}

// An encoder's counts and ids are whole numbers in range (a double outside int64 does not
// convert): an error naming the field.
TEST(HfConfigTest, EncoderCountsAreWholeNumbersInRange) {
  const std::string bert = R"({"architectures":["BertModel"],"hidden_size":384,
      "intermediate_size":1536,"max_position_embeddings":512,"num_attention_heads":12,
      "num_hidden_layers":6,"vocab_size":30522)";
  auto ok = ParseHfConfig(bert + R"(,"type_vocab_size":2})", "config.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->n_token_types, 2);
  for (const char* bad : {R"(,"type_vocab_size":1e300})", R"(,"type_vocab_size":2.5})",
                          R"(,"type_vocab_size":-1})"}) {
    auto c = ParseHfConfig(bert + bad, "config.json");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find("type_vocab_size"), std::string::npos)
        << c.status().message();
  }
  const std::string roberta = R"({"architectures":["RobertaModel"],"hidden_size":384,
      "intermediate_size":1536,"max_position_embeddings":514,"num_attention_heads":12,
      "num_hidden_layers":6,"vocab_size":30522,"pad_token_id":-1e300})";
  auto r = ParseHfConfig(roberta, "config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pad_token_id"), std::string::npos) << r.status().message();
}

TEST(HfConfigTest, Errors) {
  auto err = [](const std::string& text) {
    auto c = ParseHfConfig(text, "dir/config.json");
    EXPECT_FALSE(c.ok()) << text;
    return c.ok() ? std::string() : c.status().message();
  };
  EXPECT_NE(err("{").find("dir/config.json: not valid JSON"), std::string::npos);
  EXPECT_NE(err(R"({"architectures":["GPT2LMHeadModel"]})").find("GPT2LMHeadModel"),
            std::string::npos);
  const std::string base = R"({"architectures":["LlamaForCausalLM"],"num_hidden_layers":2,
      "num_attention_heads":4,"intermediate_size":8)";
  EXPECT_NE(err(base + "}").find("hidden_size"), std::string::npos);
  EXPECT_NE(err(base + R"(,"hidden_size":"64"})").find("hidden_size"), std::string::npos);
  EXPECT_NE(err(base + R"(,"hidden_size":64,"num_key_value_heads":3})").find("multiple"),
            std::string::npos);
  EXPECT_NE(err(base + R"(,"hidden_size":64,"rope_scaling":{"rope_type":"yarn"}})").find("yarn"),
            std::string::npos);
  EXPECT_NE(err(R"({"architectures":["Qwen2ForCausalLM"],"hidden_size":64,"num_hidden_layers":2,
      "num_attention_heads":4,"intermediate_size":8,"use_sliding_window":true})")
                .find("use_sliding_window"),
            std::string::npos);
}

TEST_F(HfConvertTest, UnknownTensorAndMissingFilesAreErrors) {
  const std::string hf = (dir_ / "m").string();
  fs::create_directories(hf);
  std::ofstream(hf + "/config.json") << R"({"architectures":["LlamaForCausalLM"],
      "hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,"intermediate_size":8})";
  auto none = HfGguf::Convert(hf);
  ASSERT_FALSE(none.ok());
  safetensors::Writer w;
  float x[4] = {};
  ASSERT_TRUE(w.Add("model.layers.0.mlp.experts.0.w1", safetensors::Dtype::kF32, {4}, x,
                    sizeof(x)).ok());
  ASSERT_TRUE(w.WriteFile(hf + "/model.safetensors").ok());
  auto bad = HfGguf::Convert(hf);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("model.layers.0.mlp.experts.0.w1"), std::string::npos);
  auto load = LoadHfModel(hf);
  EXPECT_FALSE(load.ok());
}

TEST_F(HfConvertTest, TokenizerMetadata) {
  const std::string root = TestdataDir();
  const std::string tok_dir = root + "/tokenizers/qwen3";
  const std::string path = ModelPath("tiny-qwen3-F32.gguf");
  if (root.empty() || path.empty() || !fs::exists(tok_dir + "/tokenizer.json")) {
    GTEST_SKIP() << "testdata not found";
  }
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  const std::string hf = (dir_ / "tok").string();
  ASSERT_TRUE(ExportHfFolder(*file, hf).ok());
  fs::copy_file(tok_dir + "/tokenizer.json", hf + "/tokenizer.json");
  fs::copy_file(tok_dir + "/tokenizer_config.json", hf + "/tokenizer_config.json");
  const std::string out = (dir_ / "tok.gguf").string();
  Status st = ConvertHfFolderToGguf(hf, out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto g = gguf::GgufFile::Open(out);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto json = ReadFileToString(tok_dir + "/tokenizer.json");
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(g->GetString("tokenizer.huggingface.json"), *json);
  auto cfg = testing::ReadJson(tok_dir + "/tokenizer_config.json");
  EXPECT_EQ(g->GetString("tokenizer.chat_template"), cfg["chat_template"].get<std::string>());
  EXPECT_EQ(g->GetInt("tokenizer.ggml.eos_token_id"), 151645);  // <|im_end|>
  EXPECT_FALSE(g->GetInt("tokenizer.ggml.bos_token_id").has_value());  // bos_token: null
  EXPECT_EQ(g->GetString("general.name"), "tok");
  EXPECT_EQ(g->GetInt("general.file_type"), 0);
}

// A JSON value of the wrong type that a reader does not check itself (nlohmann throws) is an
// error naming the folder, never an exception out of the conversion.
TEST_F(HfConvertTest, AValueOfTheWrongTypeIsAnError) {
  const std::string path = ModelPath("tiny-qwen3-F32.gguf");
  if (path.empty()) GTEST_SKIP() << "testdata not found";
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  const std::string hf = (dir_ / "typed").string();
  ASSERT_TRUE(ExportHfFolder(*file, hf).ok());
  std::ofstream(hf + "/tokenizer.json") << R"({"model": {"type": 7, "vocab": {}}})";
  std::ofstream(hf + "/tokenizer_config.json") << "{}";
  Status st = ConvertHfFolderToGguf(hf, (dir_ / "typed.gguf").string());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(hf + ": a JSON file of the model folder has a value of the wrong "
                                   "type"),
            std::string::npos)
      << st.ToString();
}

}  // namespace
}  // namespace tachyon::model
