// Tokenizer / tensor summaries on files built with GgufWriter.
#include "gguf/summary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tachyon::gguf {
namespace {

TEST(GgufSummary, TokenizerRolesTemplatesAndFlags) {
  GgufWriter w;
  w.Set("tokenizer.ggml.model", Value::String("gpt2"));
  w.Set("tokenizer.ggml.tokens", Value::StringArray({"<s>", "</s>", "x"}));
  w.Set("tokenizer.ggml.merges", Value::StringArray({"a b"}));
  w.Set("tokenizer.ggml.bos_token_id", Value::Uint32(0));
  w.Set("tokenizer.ggml.eot_token_id", Value::Int32(2));
  w.Set("tokenizer.ggml.padding_token_id", Value::Uint32(0xffffffffu));
  w.Set("tokenizer.ggml.add_eos_token", Value::Bool(true));
  w.Set("tokenizer.chat_template", Value::String("abc"));
  w.Set("tokenizer.chat_template.rag", Value::String("12345"));
  const std::string b = w.Serialize();
  auto f = GgufFile::Parse(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "s.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const TokenizerSummary t = SummarizeTokenizer(*f);
  EXPECT_EQ(t.model, "gpt2");
  EXPECT_FALSE(t.pre.has_value());
  EXPECT_EQ(t.vocab_size, 3u);
  EXPECT_EQ(t.merges, 1u);
  EXPECT_FALSE(t.has_scores);
  ASSERT_EQ(t.special.size(), 3u);
  EXPECT_EQ(t.special[0].role, "bos");
  EXPECT_EQ(t.special[0].text, "<s>");
  EXPECT_EQ(t.special[1].role, "eot");
  EXPECT_EQ(t.special[1].text, "x");
  EXPECT_EQ(t.special[2].role, "padding");
  EXPECT_EQ(t.special[2].id, 0xffffffffLL);
  EXPECT_FALSE(t.special[2].text.has_value());
  EXPECT_FALSE(t.add_bos.has_value());
  EXPECT_EQ(t.add_eos, true);
  EXPECT_EQ(t.chat_template_bytes, 3u);
  ASSERT_EQ(t.chat_template_variants.size(), 1u);
  EXPECT_EQ(t.chat_template_variants[0].first, "rag");
  EXPECT_EQ(t.chat_template_variants[0].second, 5u);
}

TEST(GgufSummary, TensorTotalsByType) {
  GgufWriter w;
  std::vector<uint8_t> buf(1024);
  ASSERT_TRUE(w.AddTensor("a", GgmlType::kF32, {4, 2}, buf.data(), 32).ok());
  ASSERT_TRUE(w.AddTensor("b", GgmlType::kQ8_0, {64}, buf.data(), 68).ok());
  ASSERT_TRUE(w.AddTensor("c", GgmlType::kF32, {3}, buf.data(), 12).ok());
  const std::string b = w.Serialize();
  auto f = GgufFile::Parse(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "s.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const TensorTotals t = SummarizeTensors(*f);
  EXPECT_EQ(t.tensors, 3u);
  EXPECT_EQ(t.parameters, 8u + 64u + 3u);
  EXPECT_EQ(t.bytes, 32u + 68u + 12u);
  ASSERT_EQ(t.by_type.size(), 2u);
  EXPECT_EQ(t.by_type[0].type, GgmlType::kF32);
  EXPECT_EQ(t.by_type[0].tensors, 2u);
  EXPECT_EQ(t.by_type[0].bytes, 44u);
  EXPECT_EQ(t.by_type[1].type, GgmlType::kQ8_0);
  EXPECT_EQ(t.by_type[1].parameters, 64u);
}

TEST(GgufSummary, Formatting) {
  EXPECT_EQ(ShapeString({256, 512}), "[256, 512]");
  EXPECT_EQ(ShapeString({7}), "[7]");
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(1536), "1.50 KiB");
  EXPECT_EQ(HumanBytes(uint64_t{3} << 30), "3.00 GiB");
  EXPECT_EQ(Value::Float32(0.5f).ToString(), "0.5");
  EXPECT_EQ(Value::String("a\"b\n").ToString(), "\"a\\\"b\\n\"");
  EXPECT_EQ(Value::Int32Array({1, 2, 3}).ToString(2), "[1, 2, ... (3 items)]");
  EXPECT_EQ(Value::Bool(true).ToString(), "true");
  EXPECT_EQ(Value::Int8(-5).ToString(), "-5");
}

}  // namespace
}  // namespace tachyon::gguf
