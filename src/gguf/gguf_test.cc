// Reads the real GGUF files of ../shared/testdata and checks facts stated by its READMEs.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "gguf/gguf.h"
#include "util/testing/testdata.h"

namespace tachyon::gguf {
namespace {

namespace fs = std::filesystem;

std::string Testdata() {
  return TestdataDir();
}

#define REQUIRE_TESTDATA()           \
  const std::string td = Testdata(); \
  if (td.empty()) GTEST_SKIP() << "../shared/testdata not found (set TACHYON_TESTDATA)"

TEST(GgufRealFiles, Stories260K) {
  REQUIRE_TESTDATA();
  auto f = GgufFile::Open(td + "/stories260K/stories260K.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->Architecture(), "llama");
  EXPECT_EQ(f->GetString("tokenizer.ggml.model").value_or(""), "llama");
  EXPECT_EQ(f->GetArraySize("tokenizer.ggml.tokens").value_or(0), 512u);
  EXPECT_EQ(f->GetArraySize("tokenizer.ggml.scores").value_or(0), 512u);
  EXPECT_EQ(f->GetInt("tokenizer.ggml.bos_token_id").value_or(-1), 1);
  EXPECT_EQ(f->GetInt("tokenizer.ggml.eos_token_id").value_or(-1), 2);
  EXPECT_EQ(f->GetInt("llama.embedding_length").value_or(0), 64);
  EXPECT_EQ(f->GetInt("llama.feed_forward_length").value_or(0), 172);
  EXPECT_EQ(f->GetInt("llama.block_count").value_or(0), 5);
  EXPECT_EQ(f->GetInt("llama.attention.head_count").value_or(0), 8);
  EXPECT_EQ(f->GetInt("llama.attention.head_count_kv").value_or(0), 4);
  // Byte-fallback pieces <0x00>.. sit at ids 3..258.
  const Value* tokens = f->Find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->elem_type, ValueType::kString);
  EXPECT_EQ(tokens->arr[3].s, "<0x00>");
  EXPECT_EQ(tokens->arr[258].s, "<0xFF>");
  // Tensors: all F32, embedding [64, 512].
  const TensorInfo* emb = f->FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, GgmlType::kF32);
  ASSERT_EQ(emb->dims.size(), 2u);
  EXPECT_EQ(emb->dims[0], 64);
  EXPECT_EQ(emb->dims[1], 512);
  EXPECT_EQ(emb->nbytes, 64u * 512u * 4u);
  for (const TensorInfo& t : f->tensors()) {
    EXPECT_EQ(t.type, GgmlType::kF32) << t.name;
    EXPECT_EQ(t.offset % f->alignment(), 0u);
    EXPECT_LE(f->data_offset() + t.offset + t.nbytes, f->file_size());
  }
  // Weights are real numbers of modest size (a misplaced data offset would read garbage).
  const float* w = reinterpret_cast<const float*>(f->TensorData(*emb));
  double sum_sq = 0;
  for (int k = 0; k < 64 * 512; ++k) sum_sq += static_cast<double>(w[k]) * w[k];
  EXPECT_GT(sum_sq, 0.0);
  EXPECT_LT(sum_sq / (64 * 512), 100.0);
  // The metadata lookups and the file order agree.
  for (const auto& [key, value] : f->metadata()) EXPECT_EQ(f->Find(key), &value) << key;
  EXPECT_EQ(f->Find("no.such.key"), nullptr);
  EXPECT_EQ(f->FindTensor("no.such.tensor"), nullptr);
  EXPECT_FALSE(f->GetInt("general.architecture").has_value());  // wrong type -> nullopt
}

TEST(GgufRealFiles, EveryVocabFileParses) {
  REQUIRE_TESTDATA();
  int n = 0;
  for (const auto& e : fs::directory_iterator(td + "/vocab")) {
    if (e.path().extension() != ".gguf") continue;
    ++n;
    auto f = GgufFile::Open(e.path().string());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_TRUE(f->tensors().empty()) << e.path();  // vocab-only
    EXPECT_TRUE(f->GetString("tokenizer.ggml.model").has_value()) << e.path();
    const auto n_tokens = f->GetArraySize("tokenizer.ggml.tokens");
    ASSERT_TRUE(n_tokens.has_value()) << e.path();
    EXPECT_GT(*n_tokens, 1000u) << e.path();
  }
  EXPECT_GE(n, 5);
}

TEST(GgufRealFiles, VocabFacts) {
  REQUIRE_TESTDATA();
  auto bert = GgufFile::Open(td + "/vocab/ggml-vocab-bert-bge.gguf");
  ASSERT_TRUE(bert.ok()) << bert.status().ToString();
  EXPECT_EQ(bert->GetString("tokenizer.ggml.model").value_or(""), "bert");
  EXPECT_TRUE(bert->GetInt("tokenizer.ggml.seperator_token_id").has_value());
  auto gpt2 = GgufFile::Open(td + "/vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(gpt2.ok()) << gpt2.status().ToString();
  EXPECT_EQ(gpt2->GetString("tokenizer.ggml.model").value_or(""), "gpt2");
  EXPECT_EQ(gpt2->GetArraySize("tokenizer.ggml.tokens").value_or(0), 50257u);
  EXPECT_TRUE(gpt2->GetArraySize("tokenizer.ggml.merges").has_value());
}

// The tiny models: every one parses, its tensor data lies inside the file, and the llama
// ones carry the dimensions that models/README.md states.
TEST(GgufRealFiles, TinyModels) {
  REQUIRE_TESTDATA();
  int n = 0;
  for (const auto& e : fs::directory_iterator(td + "/models/models")) {
    if (e.path().extension() != ".gguf") continue;
    ++n;
    auto f = GgufFile::Open(e.path().string());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const std::string arch = f->Architecture();
    EXPECT_FALSE(arch.empty());
    EXPECT_EQ(f->GetInt(arch + ".embedding_length").value_or(0), 256) << e.path();
    EXPECT_EQ(f->GetInt(arch + ".block_count").value_or(0), 2) << e.path();
    EXPECT_EQ(f->GetInt(arch + ".attention.head_count").value_or(0), 4) << e.path();
    EXPECT_EQ(f->GetInt(arch + ".attention.head_count_kv").value_or(0), 2) << e.path();
    EXPECT_NEAR(f->GetFloat(arch + ".attention.layer_norm_rms_epsilon").value_or(0), 1e-5, 1e-9);
    EXPECT_EQ(f->GetArraySize("tokenizer.ggml.tokens").value_or(0), 512u);
    const TensorInfo* emb = f->FindTensor("token_embd.weight");
    ASSERT_NE(emb, nullptr) << e.path();
    EXPECT_EQ(emb->dims[0], 256);
    EXPECT_EQ(emb->dims[1], 512);
    uint64_t bytes = 0;
    for (const TensorInfo& t : f->tensors()) bytes += t.nbytes;
    EXPECT_LE(f->data_offset() + bytes, f->file_size());
    EXPECT_GT(f->data_offset() + bytes + 64 * f->tensors().size(), f->file_size())
        << "tensor bytes should account for nearly the whole data section";
  }
  EXPECT_GE(n, 10);
}

TEST(GgufRealFiles, QuantTypesFromFileName) {
  REQUIRE_TESTDATA();
  const char* kTypes[] = {"Q4_0", "Q8_0", "Q6_K", "BF16", "F16", "Q2_K"};
  for (const char* type : kTypes) {
    const std::string path = td + "/models/models/tiny-llama-" + type + ".gguf";
    if (!fs::exists(path)) continue;
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const TensorInfo* q = f->FindTensor("blk.0.attn_q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(TypeName(q->type), type) << path;
    const TensorInfo* norm = f->FindTensor("blk.0.attn_norm.weight");
    ASSERT_NE(norm, nullptr);
    EXPECT_EQ(norm->type, GgmlType::kF32);  // 1-D tensors stay F32
  }
}

TEST(GgufOpen, MissingFileIsNotFound) {
  auto f = GgufFile::Open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace tachyon::gguf

namespace tachyon::gguf {
namespace {

// Re-writing a real file with GgufWriter (same metadata, same tensors in the same order)
// reproduces llama.cpp's bytes exactly: our output is standard GGUF.
TEST(GgufRealFiles, RewriteReproducesLlamaCppBytes) {
  REQUIRE_TESTDATA();
  for (const char* rel : {"/stories260K/stories260K.gguf", "/models/models/tiny-qwen2-Q4_K_M.gguf",
                          "/vocab/ggml-vocab-bert-bge.gguf"}) {
    const std::string path = td + rel;
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    GgufWriter w;
    for (const auto& [key, value] : f->metadata()) w.Set(key, value);
    for (const TensorInfo& t : f->tensors()) {
      ASSERT_TRUE(w.AddTensorRef(t.name, t.type, t.dims, f->TensorData(t), t.nbytes).ok());
    }
    const std::string out = w.Serialize();
    auto orig = ReadFileToString(path);
    ASSERT_TRUE(orig.ok());
    EXPECT_EQ(out.size(), orig->size()) << path;
    EXPECT_TRUE(out == *orig) << path << ": bytes differ";
  }
}

}  // namespace
}  // namespace tachyon::gguf
