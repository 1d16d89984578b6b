// llama.cpp's tokenizer vectors (testdata/vocab): every .inp string must give exactly the .out
// ids (no special tokens added, special-token text parsed as plain text).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tokenizer/test_util.h"
#include "util/testing/testdata.h"

namespace tachyon::tokenizer {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Splits an .inp file on the "\n__ggml_vocab_test__\n" marker (see vocab/FORMAT.md).
std::vector<std::string> ReadInputs(const std::string& path) {
  const std::string data = Slurp(path);
  const std::string marker = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t hit = data.find(marker, pos);
    if (hit == std::string::npos) {
      out.push_back(data.substr(pos));
      break;
    }
    out.push_back(data.substr(pos, hit - pos));
    pos = hit + marker.size();
  }
  return out;
}

std::vector<std::vector<int32_t>> ReadOutputs(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<int32_t>> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    int32_t id;
    while (ls >> id) ids.push_back(id);
    out.push_back(ids);
  }
  return out;
}

void CheckVectors(const Tokenizer& tok, const std::string& base) {
  const auto inputs = ReadInputs(base + ".inp");
  const auto outputs = ReadOutputs(base + ".out");
  ASSERT_EQ(inputs.size(), outputs.size()) << base;
  ASSERT_GT(inputs.size(), 10u);
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(tok.Encode(inputs[i], /*add_special=*/false, /*parse_special=*/false), outputs[i])
        << base << " case " << i << ": '" << inputs[i] << "'";
  }
}

class GgufVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufVocab, MatchesLlamaCppVectors) {
  const std::string rel = "vocab/ggml-vocab-" + GetParam() + ".gguf";
  const Tokenizer* tok = testing_util::GgufTokenizer(rel);
  if (tok == nullptr) GTEST_SKIP() << "testdata/" << rel << " not found";
  CheckVectors(*tok, TestdataDir() + "/" + rel);
}

INSTANTIATE_TEST_SUITE_P(Vocab, GgufVocab,
                         ::testing::Values("bert-bge", "deepseek-coder", "gpt-2", "llama-spm",
                                           "mpt", "phi-3", "refact"));

// Vectors whose GGUF is not in testdata, checked with the matching tokenizer.json.
TEST(InpOutOnly, Llama3AndQwen2) {
  for (auto [vocab, tokenizer] : {std::pair{"llama-bpe", "llama3"}, {"qwen2", "qwen3"}}) {
    const Tokenizer* tok = testing_util::HfTokenizer(tokenizer);
    if (tok == nullptr) GTEST_SKIP() << "testdata/tokenizers/" << tokenizer << " not found";
    CheckVectors(*tok, TestdataDir() + "/vocab/inp-out-only/ggml-vocab-" + vocab + ".gguf");
  }
}

// Loading every GGUF vocabulary in testdata works (also those without vectors).
TEST(GgufVocabLoad, AllFilesLoad) {
  for (const char* name : {"baichuan", "gpt-neox"}) {
    const std::string rel = std::string("vocab/ggml-vocab-") + name + ".gguf";
    const Tokenizer* tok = testing_util::GgufTokenizer(rel);
    if (tok == nullptr) GTEST_SKIP() << rel << " not found";
    const auto ids = tok->Encode("Hello world, 123!", false);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tok->Decode(ids), "Hello world, 123!") << name;
  }
}

}  // namespace
}  // namespace tachyon::tokenizer
