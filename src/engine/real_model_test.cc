// The engine over the real model: stories260K (testdata) decoded greedily through the
// scheduler, chunked prefill, prefix cache and preemption must reproduce llama2.c's greedy
// generations token for token. Skipped when the testdata is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/engine_core.h"
#include "engine/model_adapter.h"
#include "engine/pd_export.h"
#include "engine/tokenizer_adapter.h"
#include "kv/kv_wire.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/testing/testdata.h"

namespace tachyon::engine {
namespace {

struct Case {
  std::vector<int32_t> prompt;
  std::vector<int32_t> expected;  // generated ids, + the terminating BOS when it stopped on it
};

class StoriesEngineTest : public ::testing::Test {
 protected:
  static constexpr size_t kMaxNew = 40;

  void SetUp() override {
    const std::string dir = TestdataDir();
    if (dir.empty()) GTEST_SKIP() << "testdata not found (../shared/testdata)";
    path_ = dir + "/stories260K/stories260K.gguf";
    std::ifstream probe(path_);
    if (!probe) GTEST_SKIP() << "missing " << path_;
    auto m = model::Model::Load(path_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::shared_ptr<model::Model>(std::move(m).value());
    std::ifstream f(dir + "/stories260K/reference/generations.json");
    ASSERT_TRUE(f.good());
    nlohmann::json j = nlohmann::json::parse(f);
    for (const auto& c : j["cases"]) {
      Case k;
      k.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
      k.expected = c["generated_ids"].get<std::vector<int32_t>>();
      if (c["stop_reason"] == "bos") k.expected.push_back(1);
      // Greedy decoding is a function of the prefix: the first kMaxNew tokens must match
      // (keeps the test fast, under ASan too).
      if (k.expected.size() > kMaxNew) k.expected.resize(kMaxNew);
      cases_.push_back(std::move(k));
    }
  }

  EngineConfig Config(int num_blocks, int64_t budget) const {
    EngineConfig c;
    c.kv.num_blocks = num_blocks;
    c.kv.block_size = 16;
    c.scheduler.max_num_batched_tokens = budget;
    c.scheduler.max_num_seqs = 16;
    c.max_model_len = 512;  // llama2.c seq_len (the GGUF says 128; the references go past it)
    c.eos_token_ids = {1};  // llama2.c stops when the argmax is BOS
    return c;
  }

  EngineRequest Request(const Case& k) const {
    EngineRequest r;
    r.prompt_tokens = k.prompt;
    r.params.temperature = 0;
    r.params.max_tokens = static_cast<int>(k.expected.size());
    return r;
  }

  // Runs every case at once; returns the generated ids per case.
  std::vector<std::vector<int32_t>> RunAll(const EngineConfig& c, EngineMetrics* metrics) {
    auto exec = ModelAdapter::Create(model_, c.kv.num_blocks, c.kv.block_size, 1);
    EXPECT_TRUE(exec.ok());
    auto engine = std::move(Engine::Create(c, exec->get())).value();
    std::vector<std::vector<int32_t>> got(cases_.size());
    for (size_t i = 0; i < cases_.size(); ++i) {
      Status s = engine->Add(i, Request(cases_[i]));
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    for (int step = 0; step < 100000 && engine->HasWork(); ++step) {
      for (const RequestOutput& o : engine->Step()) {
        EXPECT_NE(o.finish_reason, FinishReason::kError) << o.error.ToString();
        got[o.request_id].insert(got[o.request_id].end(), o.token_ids.begin(), o.token_ids.end());
      }
    }
    *metrics = engine->Metrics();
    return got;
  }

  std::string path_;
  std::shared_ptr<model::Model> model_;
  std::vector<Case> cases_;
};

TEST_F(StoriesEngineTest, BatchedChunkedGreedyMatchesLlama2c) {
  EngineMetrics m;
  auto got = RunAll(Config(256, 8), &m);  // prompts of up to 19 tokens: chunked by 8
  for (size_t i = 0; i < cases_.size(); ++i) EXPECT_EQ(got[i], cases_[i].expected) << "case " << i;
  EXPECT_EQ(m.kv.used_blocks, 0);
}

TEST_F(StoriesEngineTest, TightPoolPreemptsAndStillMatches) {
  EngineMetrics m;
  auto got = RunAll(Config(12, 64), &m);  // 192 positions for ~420 needed
  for (size_t i = 0; i < cases_.size(); ++i) EXPECT_EQ(got[i], cases_[i].expected) << "case " << i;
  EXPECT_GT(m.num_preemptions, 0);
  EXPECT_EQ(m.kv.used_blocks, 0);
}

// Speculative decoding with n-gram drafts (stories repeat their phrases): the same greedy
// tokens, batched and chunked, and under preemption, with drafts accepted.
TEST_F(StoriesEngineTest, NgramSpeculationMatchesLlama2c) {
  for (int num_blocks : {256, 12}) {
    EngineConfig c = Config(num_blocks, num_blocks == 256 ? 16 : 64);
    c.speculative.method = spec::SpecMethod::kNgram;
    c.speculative.num_speculative_tokens = 4;
    c.speculative.prompt_lookup_min = 1;
    c.speculative.prompt_lookup_max = 3;
    c.speculative.min_acceptance_rate = 0;
    c.speculative.disable_by_batch_size = 64;
    EngineMetrics m;
    auto got = RunAll(c, &m);
    for (size_t i = 0; i < cases_.size(); ++i) {
      EXPECT_EQ(got[i], cases_[i].expected) << "case " << i << ", " << num_blocks << " blocks";
    }
    EXPECT_GT(m.spec.num_accepted_tokens, 0);
    EXPECT_LT(m.spec.num_accepted_tokens, m.spec.num_draft_tokens);
    EXPECT_EQ(m.kv.used_blocks, 0);
    if (num_blocks == 12) EXPECT_GT(m.num_preemptions, 0);
  }
}

TEST_F(StoriesEngineTest, EngineCoreStreamsTextWithStopString) {
  auto tok = tokenizer::Tokenizer::FromFile(path_);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer(std::move(tok).value());
  EngineConfig c = Config(128, 32);
  c.detokenizer = std::make_shared<TokenizerDetokenizer>(tokenizer);
  auto exec = ModelAdapter::Create(model_, c.kv.num_blocks, c.kv.block_size, 1);
  ASSERT_TRUE(exec.ok());
  auto core = std::move(EngineCore::Create(c, std::move(exec).value())).value();

  const Case& k = cases_[0];
  const std::string full = tokenizer->Decode(k.expected, /*skip_special=*/true);
  auto s = core->AddRequest(Request(k));
  ASSERT_TRUE(s.ok());
  std::string text;
  while (auto o = (*s)->Next()) text += o->text;
  EXPECT_EQ(text, full);

  // Stop at the second sentence's end (spans whatever tokens it spans).
  const size_t first_dot = full.find('.');
  ASSERT_NE(first_dot, std::string::npos);
  EngineRequest r = Request(k);
  r.params.stop = {"."};
  s = core->AddRequest(r);
  ASSERT_TRUE(s.ok());
  text.clear();
  FinishReason finish = FinishReason::kNone;
  int64_t cached = 0;
  while (auto o = (*s)->Next()) {
    text += o->text;
    if (o->finished) {
      finish = o->finish_reason;
      cached = o->usage.cached_prompt_tokens;
    }
  }
  EXPECT_EQ(text, full.substr(0, first_dot));
  EXPECT_EQ(finish, FinishReason::kStop);
  EXPECT_EQ(cached, 0);  // a 5-token prompt has no full 16-token block to reuse

  // A 19-token prompt run twice: the second reuses its first 16 positions.
  const Case& longest = cases_[7];
  ASSERT_EQ(longest.prompt.size(), 19u);
  std::vector<int32_t> first, second;
  for (std::vector<int32_t>* out : {&first, &second}) {
    s = core->AddRequest(Request(longest));
    ASSERT_TRUE(s.ok());
    while (auto o = (*s)->Next()) {
      out->insert(out->end(), o->token_ids.begin(), o->token_ids.end());
      if (o->finished) cached = o->usage.cached_prompt_tokens;
    }
  }
  EXPECT_EQ(cached, 16);
  EXPECT_EQ(first, longest.expected);
  EXPECT_EQ(second, longest.expected);
}

// KV export (prefill/decode disaggregation) streams layer by layer: each block a step completes
// is handed layer l as soon as the forward pass stored layer l, before the later layers ran (the
// pool still holds the sentinel there), layer 0 of the step's blocks before their layer 1;
// blocks found in the prefix cache go out whole before the step. The tokens stay llama2.c's.
class LayerRecordingSink : public KvExportSink {
 public:
  struct Event {
    uint32_t index, layer;
    bool layer_written;     // the handed chunks hold computed KV
    bool last_layer_empty;  // the block's last layer still holds the sentinel
    bool digests_match;     // came with the chunks' wire checksums, those of their bytes
  };
  static constexpr uint8_t kSentinel = 0xA5;
  LayerRecordingSink(kv::BlockBytes* bytes, int num_blocks) : bytes_(bytes), n_(num_blocks) {}

  void OnLayer(uint32_t index, uint32_t group, const kv::BlockHash& hash, uint32_t layer,
               std::span<const std::span<uint8_t>> chunks,
               std::span<const uint64_t> digests) override {
    ASSERT_EQ(group, 0u);
    int block = -1;
    for (int b = 0; b < n_; ++b) {
      if (bytes_->Chunk(b, 2 * layer).data() == chunks[0].data()) block = b;
    }
    ASSERT_GE(block, 0) << "chunks outside the pool";
    ASSERT_EQ(chunks.size(), 2u);
    const auto last = bytes_->Chunk(block, bytes_->num_chunks() - 1);
    const bool digests_match = digests.size() == 2 &&
                               digests[0] == kv::KvWireChunkDigest(chunks[0]) &&
                               digests[1] == kv::KvWireChunkDigest(chunks[1]);
    events.push_back({index, layer, !AllSentinel(chunks[0]) && !AllSentinel(chunks[1]),
                      AllSentinel(last), digests_match});
    hashes[index] = hash;
  }
  void OnEnd(Status status) override { end = std::move(status), ended = true; }
  bool ReadsPool() const override { return reads_pool; }

  static bool AllSentinel(std::span<const uint8_t> c) {
    return std::all_of(c.begin(), c.end(), [](uint8_t x) { return x == kSentinel; });
  }

  std::vector<Event> events;
  std::map<uint32_t, kv::BlockHash> hashes;
  Status end;
  bool ended = false;
  bool reads_pool = false;

 private:
  kv::BlockBytes* bytes_;
  int n_;
};

TEST_F(StoriesEngineTest, KvExportStreamsLayerByLayer) {
  EngineConfig c = Config(64, 8);  // a 19-token prompt in steps of 8: 2 blocks of 4 a step
  c.kv.block_size = 4;
  auto exec = ModelAdapter::Create(model_, c.kv.num_blocks, c.kv.block_size, 1);
  ASSERT_TRUE(exec.ok());
  kv::BlockBytes* bytes = (*exec)->block_bytes();
  const int64_t n_layers = model_->config().n_layers;
  ASSERT_GE(n_layers, 2);
  ASSERT_EQ(bytes->num_layers(), n_layers);
  for (int b = 0; b < c.kv.num_blocks; ++b) {
    for (int64_t ch = 0; ch < bytes->num_chunks(); ++ch) {
      auto chunk = bytes->Chunk(b, ch);
      std::fill(chunk.begin(), chunk.end(), LayerRecordingSink::kSentinel);
    }
  }
  auto engine = std::move(Engine::Create(c, exec->get())).value();
  const Case& k = cases_[7];
  ASSERT_EQ(k.prompt.size(), 19u);
  std::vector<kv::BlockHash> want;
  kv::ExtendBlockHashes(k.prompt, c.kv.block_size, kv::RootHash(""), 4, &want);
  for (int round = 0; round < 2; ++round) {  // the second finds the prompt in the prefix cache
    auto sink = std::make_shared<LayerRecordingSink>(bytes, c.kv.num_blocks);
    EngineRequest r = Request(k);
    r.kv_export = sink;
    ASSERT_TRUE(engine->Add(round, r).ok());
    std::vector<int32_t> got;
    while (engine->HasWork()) {
      for (const RequestOutput& o : engine->Step()) {
        got.insert(got.end(), o.token_ids.begin(), o.token_ids.end());
      }
    }
    EXPECT_EQ(got, k.expected);
    ASSERT_TRUE(sink->ended);
    EXPECT_TRUE(sink->end.ok()) << sink->end.ToString();
    // Every layer of the 4 full blocks exactly once, under the prompt's block hashes.
    ASSERT_EQ(sink->events.size(), static_cast<size_t>(4 * n_layers));
    std::map<std::pair<uint32_t, uint32_t>, int> seen;
    for (const auto& e : sink->events) ++seen[{e.index, e.layer}];
    EXPECT_EQ(seen.size(), static_cast<size_t>(4 * n_layers));
    for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(sink->hashes[i], want[i]) << i;
    for (const auto& e : sink->events) EXPECT_TRUE(e.layer_written) << e.index << "/" << e.layer;
    // With the checksums of the bytes as stored: computed in the layer hook (round 0), kept with
    // the cached pages (round 1).
    for (const auto& e : sink->events) EXPECT_TRUE(e.digests_match) << e.index << "/" << e.layer;
    if (round == 0) {
      // Computed here: per step, layer 0 of blocks {0, 1} (then {2, 3}), then layer 1, ...;
      // each layer handed while the block's last layer was not computed yet.
      size_t at = 0;
      for (uint32_t first : {0u, 2u}) {
        for (uint32_t l = 0; l < n_layers; ++l) {
          for (uint32_t i = first; i < first + 2; ++i, ++at) {
            const auto& e = sink->events[at];
            EXPECT_EQ(e.index, i);
            EXPECT_EQ(e.layer, l);
            EXPECT_EQ(e.last_layer_empty, l + 1 < n_layers) << i << "/" << l;
          }
        }
      }
    } else {
      // Cached: each block whole (layers 0 .. n-1) before the step that computes the tail.
      for (size_t at = 0; at < sink->events.size(); ++at) {
        EXPECT_EQ(sink->events[at].index, at / n_layers);
        EXPECT_EQ(sink->events[at].layer, at % n_layers);
        EXPECT_FALSE(sink->events[at].last_layer_empty);
      }
    }
  }
  EXPECT_EQ(engine->Metrics().kv.used_blocks, 0);

  // A sink still sending from the pool keeps the 4 blocks pinned after the request ended (the
  // engine keeps stepping, without a request); once it stops reading they are free again.
  auto reading = std::make_shared<LayerRecordingSink>(bytes, c.kv.num_blocks);
  reading->reads_pool = true;
  EngineRequest r = Request(k);
  r.kv_export = reading;
  ASSERT_TRUE(engine->Add(7, r).ok());
  bool finished = false;
  for (int step = 0; step < 1000 && !finished; ++step) {
    for (const RequestOutput& o : engine->Step()) finished = finished || o.finished;
  }
  ASSERT_TRUE(finished);
  ASSERT_TRUE(reading->ended);
  for (int step = 0; step < 3; ++step) engine->Step();
  EXPECT_TRUE(engine->HasWork());
  EXPECT_EQ(engine->Metrics().kv.used_blocks, 4);
  reading->reads_pool = false;
  engine->Step();
  EXPECT_FALSE(engine->HasWork());
  EXPECT_EQ(engine->Metrics().kv.used_blocks, 0);
}

}  // namespace
}  // namespace tachyon::engine
