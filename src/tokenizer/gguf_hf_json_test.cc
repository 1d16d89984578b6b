// Tokenizer::FromGguf on GGUFs converted from Hugging Face folders: no tokenizer.ggml.*
// vocabulary, only the whole tokenizer.json under tokenizer.huggingface.json.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "gguf/gguf.h"
#include "tokenizer/test_util.h"
#include "tokenizer/tokenizer.h"
#include "util/mmap_file.h"

namespace tachyon::tokenizer {
namespace {

namespace fs = std::filesystem;

class GgufHfJsonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("gguf_hf_json_" + std::to_string(getpid()) + ".gguf"))
                .string();
  }
  void TearDown() override { fs::remove(path_); }
  Result<std::unique_ptr<Tokenizer>> Load(gguf::GgufWriter& w) {
    RETURN_IF_ERROR(w.WriteFile(path_));
    ASSIGN_OR_RETURN(gguf::GgufFile f, gguf::GgufFile::Open(path_));
    return Tokenizer::FromGguf(f);
  }
  std::string path_;
};

TEST_F(GgufHfJsonTest, SameAsTheFolder) {
  const std::string dir = testing_util::TokenizerDir("llama2");
  if (dir.empty()) GTEST_SKIP() << "testdata/tokenizers not found";
  const Tokenizer* ref = testing_util::HfTokenizer("llama2");
  ASSERT_NE(ref, nullptr);
  auto json = ReadFileToString(dir + "/tokenizer.json");
  ASSERT_TRUE(json.ok());
  gguf::GgufWriter w;
  w.Set("general.architecture", gguf::Value::String("llama"));
  w.Set("tokenizer.huggingface.json", gguf::Value::String(*json));
  w.Set("tokenizer.chat_template", gguf::Value::String("{{ messages }}"));
  const int32_t eos = ref->TokenId("</s>");
  ASSERT_GE(eos, 0);
  w.Set("tokenizer.ggml.eos_token_id", gguf::Value::Uint32(static_cast<uint32_t>(eos)));
  auto tok = Load(w);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->vocab_size(), ref->vocab_size());
  for (const char* text : {"Hello world!", "  123 456\n\tÜber ünïcode 你好", "<s>[INST] hi"}) {
    EXPECT_EQ((*tok)->Encode(text), ref->Encode(text)) << text;
  }
  EXPECT_EQ((*tok)->eos_id(), eos);
  EXPECT_EQ((*tok)->eos_text(), "</s>");
  EXPECT_TRUE((*tok)->IsEog(eos));
  EXPECT_EQ((*tok)->add_bos(), ref->add_bos());
  EXPECT_EQ((*tok)->chat_template(), "{{ messages }}");
}

TEST_F(GgufHfJsonTest, Errors) {
  gguf::GgufWriter w;
  w.Set("tokenizer.huggingface.json", gguf::Value::String("{not json"));
  auto tok = Load(w);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("tokenizer.huggingface.json"), std::string::npos)
      << tok.status().message();

  const std::string dir = testing_util::TokenizerDir("llama2");
  if (dir.empty()) return;
  auto json = ReadFileToString(dir + "/tokenizer.json");
  ASSERT_TRUE(json.ok());
  gguf::GgufWriter w2;
  w2.Set("tokenizer.huggingface.json", gguf::Value::String(*json));
  w2.Set("tokenizer.ggml.bos_token_id", gguf::Value::Uint32(10000000));
  tok = Load(w2);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("outside the vocabulary"), std::string::npos);

  gguf::GgufWriter none;  // neither kind of tokenizer
  tok = Load(none);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("tokenizer.ggml.model"), std::string::npos);
}

}  // namespace
}  // namespace tachyon::tokenizer
