// KV export (engine/pd_export.h) on the strict fake, with and without layer groups: the prefill
// engine hands every group's page of each full prompt block once, under its group key, and a
// decode engine that finds those pages in a store (as a decode replica finds received blocks in
// its inbox) computes only the prompt's tail, with the output of one engine alone.
#include "engine/pd_export.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "engine/testing/test_harness.h"
#include "kv/host_tier.h"
#include "kv/kv_groups.h"
#include "kv/kv_wire.h"

namespace tachyon::engine {
namespace {

using testing::Greedy;
using testing::Harness;
using testing::HarnessOptions;
using testing::MakePrompt;

// Copies each handed page slot into a store under the handed key (the fake's pages have one
// slot: one call is a whole page), and records what it got.
class StoreSink : public KvExportSink {
 public:
  explicit StoreSink(std::shared_ptr<kv::BlockStore> store) : store_(std::move(store)) {}
  void OnLayer(uint32_t index, uint32_t group, const kv::BlockHash& hash, uint32_t slot,
               std::span<const std::span<uint8_t>> chunks,
               std::span<const uint64_t> digests) override {
    ++handed[{index, group, slot}];
    keys[{index, group}] = hash;
    store_->Store(hash, chunks);
    // The chunks' wire checksums, when they come, are the chunks'.
    if (digests.empty()) return;
    ++with_digests;
    ASSERT_EQ(digests.size(), chunks.size());
    for (size_t c = 0; c < chunks.size(); ++c) {
      EXPECT_EQ(digests[c], kv::KvWireChunkDigest(chunks[c])) << index << "/" << c;
    }
  }
  void OnEnd(Status s) override {
    end = std::move(s);
    ended = true;
  }
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, int> handed;
  std::map<std::pair<uint32_t, uint32_t>, kv::BlockHash> keys;
  int with_digests = 0;  // calls that came with the chunks' checksums
  Status end;
  bool ended = false;

 private:
  std::shared_ptr<kv::BlockStore> store_;
};

HarnessOptions Options(std::vector<int64_t> windows) {
  HarnessOptions o;
  o.kv_group_windows = std::move(windows);
  o.max_batched_tokens = 8;  // the 33-token prompt in 5 steps
  return o;
}

void ExportThenDecode(const std::vector<int64_t>& windows) {
  const std::vector<int32_t> prompt = MakePrompt(33, 5);  // 8 full blocks of 4, then 1 token
  const int groups = windows.empty() ? 1 : static_cast<int>(windows.size());
  auto store = std::make_shared<kv::HostTier>(1 << 20, nullptr);

  Harness prefill(Options(windows));
  auto sink = std::make_shared<StoreSink>(store);
  EngineRequest r = Greedy(prompt, 1);
  r.kv_export = sink;
  ASSERT_TRUE(prefill.Add(1, std::move(r)).ok());
  prefill.RunToCompletion();
  ASSERT_TRUE(sink->ended);
  EXPECT_TRUE(sink->end.ok()) << sink->end.ToString();
  // Every group's page of the 8 full blocks, once each (sliding pages are live while their
  // block is computed), under the group's key of the prompt's chain.
  EXPECT_EQ(sink->handed.size(), static_cast<size_t>(8 * groups));
  for (const auto& [at, n] : sink->handed) EXPECT_EQ(n, 1);
  std::vector<kv::BlockHash> chain;
  kv::ExtendBlockHashes(prompt, 4, kv::RootHash(""), 8, &chain);
  for (uint32_t i = 0; i < 8; ++i) {
    for (int g = 0; g < groups; ++g) {
      const auto it = sink->keys.find({i, static_cast<uint32_t>(g)});
      ASSERT_NE(it, sink->keys.end()) << i << "/" << g;
      EXPECT_EQ(it->second, kv::GroupBlockHash(chain[i], g)) << i << "/" << g;
    }
  }
  EXPECT_EQ(prefill.engine().Metrics().kv.used_blocks, 0);

  HarnessOptions d = Options(windows);
  d.kv_stores = {store};
  Harness decode(d), alone(Options(windows));
  ASSERT_TRUE(decode.Add(1, Greedy(prompt, 6)).ok());
  decode.RunToCompletion();
  ASSERT_TRUE(alone.Add(1, Greedy(prompt, 6)).ok());
  alone.RunToCompletion();
  EXPECT_EQ(decode.result(1).tokens, alone.result(1).tokens);
  EXPECT_EQ(decode.usage(1).cached_prompt_tokens, 32);
  EXPECT_EQ(decode.exec().num_tokens_computed(), 1 + 5);  // the tail, then 5 decode steps
  const EngineMetrics m = decode.engine().Metrics();
  // The full groups' 8 pages and, per sliding group, only the window before the prompt's end.
  int64_t want = 0;
  for (int g = 0; g < groups; ++g) {
    const int64_t w = windows.empty() ? 0 : windows[g];
    want += 8 - kv::FirstLiveBlock(w, 32, 4);
  }
  EXPECT_EQ(m.kv_offload.loaded_blocks, want);
  EXPECT_EQ(m.kv.used_blocks, 0);
}

TEST(KvExportTest, OneGroupExportsEveryBlockAndTheDecoderComputesTheTail) {
  ExportThenDecode({});
}

TEST(KvExportTest, LayerGroupsExportEveryPageAndTheDecoderLoadsTheWindow) {
  ExportThenDecode({0, 8, 8});
}

TEST(KvExportTest, ChecksumsComeWithStoredLayersAndWithCachedPagesAnExportComputed) {
  auto store = std::make_shared<kv::HostTier>(1 << 20, nullptr);
  Harness h(Options({}));
  auto exporting = [&](int64_t id, const std::vector<int32_t>& prompt) {
    auto sink = std::make_shared<StoreSink>(store);
    EngineRequest r = Greedy(prompt, 1);
    r.kv_export = sink;
    EXPECT_TRUE(h.Add(id, std::move(r)).ok());
    h.RunToCompletion();
    EXPECT_TRUE(sink->ended && sink->end.ok());
    EXPECT_EQ(sink->handed.size(), 8u);
    return sink;
  };
  // Pages a request without export computed: found cached, they go out without checksums.
  const std::vector<int32_t> plain = MakePrompt(33, 5);
  ASSERT_TRUE(h.Add(1, Greedy(plain, 1)).ok());
  h.RunToCompletion();
  EXPECT_EQ(exporting(2, plain)->with_digests, 0);
  EXPECT_EQ(h.usage(2).cached_prompt_tokens, 32);
  // Pages computed by an export: with them as computed, and again when found cached.
  const std::vector<int32_t> prompt = MakePrompt(33, 6);
  EXPECT_EQ(exporting(3, prompt)->with_digests, 8);
  EXPECT_EQ(h.usage(3).cached_prompt_tokens, 0);
  EXPECT_EQ(exporting(4, prompt)->with_digests, 8);
  EXPECT_EQ(h.usage(4).cached_prompt_tokens, 32);
}

// A request that Add refuses after the server accepted it ends its export with the error, so
// the transfer waiting on the sink (and the answer held until it ends) are released.
TEST(KvExportTest, ARefusedRequestEndsItsExport) {
  auto store = std::make_shared<kv::HostTier>(1 << 20, nullptr);
  Harness h(Options({}));
  const std::vector<int32_t> prompt = MakePrompt(33, 5);
  ASSERT_TRUE(h.Add(1, Greedy(prompt, 1)).ok());
  auto refused = [&](EngineRequest r) {
    auto sink = std::make_shared<StoreSink>(store);
    r.kv_export = sink;
    EXPECT_FALSE(h.Add(1, std::move(r)).ok());
    EXPECT_TRUE(sink->ended);
    EXPECT_FALSE(sink->end.ok());
    EXPECT_TRUE(sink->handed.empty());
  };
  refused(Greedy(prompt, 1));                  // a duplicate id
  refused(Greedy(MakePrompt(1 << 20, 5), 1));  // longer than the context
  h.RunToCompletion();
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
}

}  // namespace
}  // namespace tachyon::engine
