// Loading, validation and batch errors on synthetic models written with WriteSynthModel
// (no testdata needed).
#include "model/model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include "gguf/gguf.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "model/synth.h"
#include "model/test_util.h"

namespace tachyon::model {
namespace {

using testing::AllLogits;
using testing::Blocks;
using testing::MaxAbsDiff;

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tachyon_model_test_" + std::to_string(getpid()) + "_" + name))
      .string();
}

// Writes a synthetic tiny model and returns its path (removed by the fixture).
class SynthModelTest : public ::testing::Test {
 protected:
  std::string Synth(const std::string& arch, const std::string& type) {
    SynthOptions o;
    o.arch = arch;
    o.shape = "tiny";
    o.type = type;
    o.seed = 5;
    const std::string path = TempPath(arch + "_" + type + ".gguf");
    Status st = WriteSynthModel(o, path, &pool_);
    EXPECT_TRUE(st.ok()) << st.ToString();
    paths_.push_back(path);
    return path;
  }
  // Copies `src` to a new file, letting `edit` change metadata and tensors on the way.
  std::string Rewrite(
      const std::string& src, const std::string& name,
      const std::function<void(gguf::GgufWriter&, std::vector<gguf::TensorInfo>&)>& edit) {
    auto f = gguf::GgufFile::Open(src);
    EXPECT_TRUE(f.ok());
    gguf::GgufWriter w;
    for (const auto& [k, v] : f->metadata()) w.Set(k, v);
    std::vector<gguf::TensorInfo> tensors = f->tensors();
    edit(w, tensors);
    for (const auto& t : tensors) {
      const gguf::TensorInfo* orig = f->FindTensor(t.name);
      EXPECT_TRUE(w.AddTensor(t.name, t.type, t.dims, f->TensorData(*orig), t.nbytes).ok());
    }
    const std::string path = TempPath(name);
    EXPECT_TRUE(w.WriteFile(path).ok());
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const auto& p : paths_) std::filesystem::remove(p);
  }
  ThreadPool pool_{1};
  std::vector<std::string> paths_;
};

TEST_F(SynthModelTest, EveryArchLoadsAndChunkingMatchesOnePass) {
  // Chunked and one-pass runs must multiply with the same rounding: at SimdLevel::kAmx that
  // depends on the number of rows for quantized weights (bf16 from kernels::AmxMinRows on,
  // 8-bit activations below; the two differ by ~1e-2 here), so every m of those takes the AMX
  // path here. F32 / F16 weights keep their float kernels at every m (bf16 rounding would
  // turn the ~1e-6 differences of the m-dependent attention kernels into ~2e-3).
  // Attention jobs take AMX from 16 query vectors: pin every job to it as well.
  kernels::SetAttentionAmxMinQueries(1);
  struct Restore {
    ~Restore() {
      kernels::SetAmxMinRows(0);
      kernels::SetAttentionAmxMinQueries(0);
    }
  } restore;
  const std::pair<std::string, std::string> cases[] = {{"llama", "Q4_K_M"},
                                                       {"llama", "F32"},
                                                       {"qwen2", "Q8_0"},
                                                       {"qwen3", "F16"},
                                                       {"gemma3", "Q8_0"}};
  for (const auto& [arch, type] : cases) {
    kernels::SetAmxMinRows(type == "F32" || type == "F16" ? 0 : 1);
    {
      SCOPED_TRACE(arch + " " + type);
      auto m = Model::Load(Synth(arch, type));
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      const ModelConfig& c = (*m)->config();
      EXPECT_EQ(c.arch, arch);
      EXPECT_EQ(c.n_vocab, 512);
      EXPECT_EQ(c.n_layers, 2);
      EXPECT_EQ(c.head_dim, 64);
      EXPECT_TRUE(c.tied_output);
      EXPECT_EQ(c.qkv_bias, arch == "qwen2");
      EXPECT_EQ(c.qk_norm, arch == "qwen3" || arch == "gemma3");
      EXPECT_EQ(c.post_norms, arch == "gemma3");
      std::vector<int32_t> ids;
      for (int i = 0; i < 40; ++i) ids.push_back((i * 37 + 1) % 512);
      const std::vector<float> want =
          AllLogits(**m, ids, &pool_, kDefaultBlockSize, kDefaultKvDtype);
      auto kv = (*m)->CreateKvCache(8, 8);
      ASSERT_TRUE(kv.ok());
      ForwardOutput out;
      for (int64_t start = 0; start < 40; start += 13) {
        const int64_t len = std::min<int64_t>(13, 40 - start);
        Batch b;
        b.tokens.assign(ids.begin() + start, ids.begin() + start + len);
        b.seqs.push_back({0, len, start, Blocks(2, 5), 1});
        ASSERT_TRUE((*m)->Forward(b, kv->get(), nullptr, &out).ok());
        ASSERT_EQ(out.n_rows, 1);
        EXPECT_LT(MaxAbsDiff(out.Row(0), want.data() + (start + len - 1) * 512, 512), 2e-4f);
      }
    }
  }
}

TEST_F(SynthModelTest, Q4KMMixMatchesLlamaCppRules) {
  auto f = gguf::GgufFile::Open(Synth("llama", "Q4_K_M"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->FindTensor("token_embd.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(f->FindTensor("blk.0.attn_v.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(f->FindTensor("blk.1.attn_v.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(f->FindTensor("blk.1.ffn_down.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(f->FindTensor("blk.1.ffn_up.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(f->FindTensor("blk.0.attn_norm.weight")->type, GgmlType::kF32);
}

TEST_F(SynthModelTest, BadFilesGiveClearErrors) {
  const std::string good = Synth("qwen2", "Q8_0");
  auto expect_error = [](const std::string& path, const std::string& needle) {
    auto m = Model::Load(path);
    ASSERT_FALSE(m.ok()) << "expected an error mentioning " << needle;
    EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().ToString();
  };
  expect_error(Rewrite(good, "arch.gguf",
                       [](gguf::GgufWriter& w, auto&) {
                         w.Set("general.architecture", gguf::Value::String("gpt-j"));
                       }),
               "unsupported architecture 'gpt-j'");
  expect_error(Rewrite(good, "missing.gguf",
                       [](gguf::GgufWriter&, std::vector<gguf::TensorInfo>& t) {
                         std::erase_if(t, [](auto& x) { return x.name == "blk.1.attn_k.bias"; });
                       }),
               "blk.1.attn_k.bias");
  expect_error(Rewrite(good, "key.gguf",
                       [](gguf::GgufWriter& w, auto&) {
                         w.Set("qwen2.block_count", gguf::Value::String("two"));
                       }),
               "qwen2.block_count");
  expect_error(Rewrite(good, "heads.gguf",
                       [](gguf::GgufWriter& w, auto&) {
                         w.Set("qwen2.attention.head_count_kv", gguf::Value::Uint32(4));
                       }),
               "blk.0.attn_k.weight has shape [256, 128], expected [256, 256]");
  expect_error(Rewrite(good, "shape.gguf",
                       [](gguf::GgufWriter& w, auto&) {
                         w.Set("qwen2.feed_forward_length", gguf::Value::Uint32(1024));
                       }),
               "ffn_gate.weight has shape [256, 512], expected [256, 1024]");
  expect_error(TempPath("does_not_exist.gguf"), "does_not_exist");
}

TEST_F(SynthModelTest, BadBatchesAreRejected) {
  auto m = Model::Load(Synth("llama", "F32"));
  ASSERT_TRUE(m.ok());
  Model& model = **m;
  auto kv = model.CreateKvCache(4, 16);
  ASSERT_TRUE(kv.ok());
  ForwardOutput out;
  auto run = [&](Batch b) { return model.Forward(b, kv->get(), nullptr, &out); };
  EXPECT_TRUE(run({{1, 2, 3}, {{0, 3, 0, {0}, 1}}}).ok());
  EXPECT_FALSE(run({{1, 512}, {{0, 2, 0, {0}, 1}}}).ok());  // token out of range
  EXPECT_FALSE(run({{1, -1}, {{0, 2, 0, {0}, 1}}}).ok());   // negative token
  EXPECT_FALSE(run({{1, 2}, {{0, 2, 15, {0}, 1}}}).ok());   // table too short
  EXPECT_FALSE(run({{1, 2}, {{0, 2, 0, {4}, 1}}}).ok());    // block outside cache
  EXPECT_FALSE(run({{1, 2}, {{0, 3, 0, {0}, 1}}}).ok());    // slice past tokens
  EXPECT_FALSE(run({{1, 2}, {{0, 1, 0, {0}, 1}}}).ok());    // token 1 uncovered
  EXPECT_FALSE(run({{1, 2}, {{0, 2, 0, {0}, 1}, {1, 1, 0, {1}, 1}}}).ok());  // overlap
  EXPECT_FALSE(run({{}, {}}).ok());
  EXPECT_FALSE(run({{1}, {{0, 1, -1, {0}, 1}}}).ok());
  auto other = KvCache::Create(3, 4, 16, 2, 64);
  ASSERT_TRUE(other.ok());
  Batch b{{1}, {{0, 1, 0, {0}, 1}}};
  EXPECT_FALSE(model.Forward(b, other->get(), nullptr, &out).ok());
}

TEST_F(SynthModelTest, ProfileAccountsForEveryForward) {
  auto m = Model::Load(Synth("llama", "F32"));
  ASSERT_TRUE(m.ok());
  Model& model = **m;
  model.SetProfiling(true);
  model.ResetProfile();
  auto kv = model.CreateKvCache(4, 16);
  ASSERT_TRUE(kv.ok());
  ForwardOutput out;
  ASSERT_TRUE(
      model.Forward({{1, 2, 3, 4, 5}, {{0, 5, 0, {0}, 1}}}, kv->get(), &pool_, &out).ok());
  ASSERT_TRUE(model.Forward({{6}, {{0, 1, 5, {0}, 1}}}, kv->get(), &pool_, &out).ok());
  const OpProfile& p = model.profile();
  EXPECT_EQ(p.forwards, 2);
  EXPECT_EQ(p.tokens, 6);
  double sum = 0;
  for (double s : p.seconds) {
    EXPECT_GE(s, 0.0);
    sum += s;
  }
  EXPECT_NEAR(sum, p.total_seconds, 1e-9 + 1e-6 * p.total_seconds);  // "other" closes the gap
  for (OpKind op : {OpKind::kMatMulQkv, OpKind::kAttention, OpKind::kFfnMatMul, OpKind::kLogits}) {
    EXPECT_GT(p.seconds[static_cast<int>(op)], 0.0) << OpKindName(op);
  }
  const std::string table = FormatProfile(p, "test");
  EXPECT_NE(table.find("| attention (+kv store) |"), std::string::npos) << table;
  EXPECT_NE(table.find("2 forward(s), 6 token(s)"), std::string::npos) << table;
  model.SetProfiling(false);
  model.ResetProfile();
  ASSERT_TRUE(model.Forward({{7}, {{0, 1, 6, {0}, 1}}}, kv->get(), &pool_, &out).ok());
  EXPECT_EQ(model.profile().forwards, 0);
  EXPECT_EQ(model.profile().total_seconds, 0.0);
}

// SetLogitRows(n): the logits of tokens [0, n) only, each row the first n entries of the full
// row bit for bit (a prefix of the packed output matrix, a partial last tile included).
TEST_F(SynthModelTest, LogitRowsArePrefixesOfTheFullRows) {
  for (const char* type : {"Q8_0", "Q4_K_M"}) {
    SCOPED_TRACE(type);
    auto m = Model::Load(Synth("qwen2", type));
    ASSERT_TRUE(m.ok());
    Model& model = **m;
    auto run = [&](ForwardOutput* out) {
      auto kv = model.CreateKvCache(4, 16);
      ASSERT_TRUE(kv.ok());
      ASSERT_TRUE(
          model.Forward({{1, 2, 3, 4, 5}, {{0, 5, 0, {0}, 3}}}, kv->get(), &pool_, out).ok());
    };
    ForwardOutput full, part;
    run(&full);
    ASSERT_EQ(full.n_vocab, 512);
    model.SetLogitRows(200);
    EXPECT_EQ(model.logit_rows(), 200);
    run(&part);
    ASSERT_EQ(part.n_vocab, 200);
    ASSERT_EQ(part.n_rows, 3);
    for (int64_t r = 0; r < 3; ++r) {
      EXPECT_EQ(std::memcmp(part.Row(r), full.Row(r), 200 * sizeof(float)), 0) << "row " << r;
    }
    for (int64_t n : {0, 512, 100000}) {
      model.SetLogitRows(n);
      EXPECT_EQ(model.logit_rows(), 512) << n;
    }
  }
}

// Every KV dtype runs the synth model (head_dim 64) and chunked prefill matches one pass
// over the same dtype.
TEST_F(SynthModelTest, EveryKvDtypeChunksLikeOnePass) {
  auto m = Model::Load(Synth("qwen2", "F32"));
  ASSERT_TRUE(m.ok());
  std::vector<int32_t> ids;
  for (int i = 0; i < 30; ++i) ids.push_back((i * 53 + 3) % 512);
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kQ8_0, KvDtype::kQ4_0,
                    KvDtype::kQ4_1}) {
    SCOPED_TRACE(kernels::KvDtypeName(d));
    const std::vector<float> want = AllLogits(**m, ids, &pool_, 16, d);
    auto kv = (*m)->CreateKvCache(4, 16, d);
    ASSERT_TRUE(kv.ok()) << kv.status().ToString();
    EXPECT_EQ((*kv)->dtype(), d);
    ForwardOutput out;
    for (int64_t start = 0; start < 30; start += 11) {
      const int64_t len = std::min<int64_t>(11, 30 - start);
      Batch b;
      b.tokens.assign(ids.begin() + start, ids.begin() + start + len);
      b.seqs.push_back({0, len, start, Blocks(1, 2), 1});
      ASSERT_TRUE((*m)->Forward(b, kv->get(), nullptr, &out).ok());
      EXPECT_LT(MaxAbsDiff(out.Row(0), want.data() + (start + len - 1) * 512, 512), 2e-4f);
    }
  }
}

}  // namespace
}  // namespace tachyon::model
