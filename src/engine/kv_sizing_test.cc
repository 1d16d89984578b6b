#include "engine/kv_sizing.h"

#include <gtest/gtest.h>

#include "kv/kv_groups.h"
#include "model/kv_cache.h"

namespace tachyon::engine {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

// A made-up model: 1 MiB per block of 16 tokens (64 KiB per token).
KvSizingInput Base() {
  KvSizingInput in;
  in.bytes_per_block = kMiB;
  in.block_size = 16;
  in.trained_context = 4096;  // 256 blocks = 256 MiB per sequence
  in.max_num_seqs = 4;
  in.available_bytes = 64 * kGiB;
  in.weight_bytes = 4 * kGiB;
  in.memory_fraction = 0.5;
  return in;
}

TEST(KvSizingTest, FitsEveryFullContextWhenMemoryAllows) {
  auto s = SizeKvCache(Base());
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->num_blocks, 4 * 256);  // capped at max_num_seqs full contexts
  EXPECT_EQ(s->max_model_len, 4096);
  EXPECT_EQ(s->budget_bytes, 1024 * kMiB);
  EXPECT_FALSE(s->lowered);
}

TEST(KvSizingTest, BudgetIsAFractionOfTheMemoryLeftAfterTheWeights) {
  KvSizingInput in = Base();
  in.available_bytes = 4 * kGiB + 600 * kMiB;  // 600 MiB after the weights; half is 300
  auto s = SizeKvCache(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->num_blocks, 300);
  EXPECT_EQ(s->max_model_len, 4096);  // one full context (256 blocks) still fits
  EXPECT_FALSE(s->lowered);
}

TEST(KvSizingTest, LowersTheTrainedContextToWhatFits) {
  KvSizingInput in = Base();
  in.trained_context = 131072;               // 8192 blocks = 8 GiB per sequence
  in.available_bytes = 4 * kGiB + 2 * kGiB;  // 1 GiB budget = 1024 blocks
  auto s = SizeKvCache(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->num_blocks, 1024);
  EXPECT_EQ(s->max_model_len, 1024 * 16);
  EXPECT_TRUE(s->lowered);
}

TEST(KvSizingTest, RefusesWhenNotEvenTheMinimumContextFits) {
  KvSizingInput in = Base();
  in.available_bytes = in.weight_bytes + 30 * kMiB;  // 15 blocks = 240 tokens < 256
  auto s = SizeKvCache(in);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("256"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("--kv-cache-memory"), std::string::npos);
  in.available_bytes = in.weight_bytes - 1;  // nothing left after the weights
  EXPECT_FALSE(SizeKvCache(in).ok());
  in.available_bytes = in.weight_bytes + 32 * kMiB;  // exactly 256 tokens: accepted
  auto ok = SizeKvCache(in);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->max_model_len, kMinKvContextTokens);
}

TEST(KvSizingTest, ExplicitBudgetWinsOverMemoryAndContexts) {
  KvSizingInput in = Base();
  in.explicit_bytes = 2 * kGiB + kMiB / 2;  // more than 4 full contexts; rounded down to blocks
  auto s = SizeKvCache(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->num_blocks, 2048);
  EXPECT_EQ(s->budget_bytes, 2 * kGiB);
  in.available_bytes = 0;          // unknown memory does not matter either
  in.explicit_bytes = 100 * kMiB;  // below one context: lowered to 1600 tokens
  s = SizeKvCache(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->max_model_len, 1600);
  EXPECT_TRUE(s->lowered);
  in.explicit_bytes = 10 * kMiB;
  s = SizeKvCache(in);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--kv-cache-memory"), std::string::npos);
}

TEST(KvSizingTest, ExplicitBlockCountWins) {
  KvSizingInput in = Base();
  in.explicit_bytes = kGiB;
  in.explicit_blocks = 300;
  auto s = SizeKvCache(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->num_blocks, 300);
}

TEST(KvSizingTest, ExplicitMaxModelLenThatDoesNotFitIsAnErrorNamingTheFlag) {
  KvSizingInput in = Base();
  in.max_model_len = 8192;         // 512 blocks
  in.explicit_bytes = 300 * kMiB;  // 300 blocks
  auto s = SizeKvCache(in);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--max-model-len 8192"), std::string::npos)
      << s.status().message();
  // One that fits is kept, even beyond the trained context.
  in.explicit_bytes = 0;
  s = SizeKvCache(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->max_model_len, 8192);
  EXPECT_EQ(s->num_blocks, 4 * 512);
  EXPECT_FALSE(s->lowered);
}

TEST(KvSizingTest, ExtraTokensExtendTheContext) {
  KvSizingInput in = Base();
  in.extra_tokens = 1;
  auto s = SizeKvCache(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->max_model_len, 4097);
  EXPECT_EQ(s->num_blocks, 4 * 257);
  in.max_model_len = 100;
  s = SizeKvCache(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->max_model_len, 101);
  in.extra_tokens = -1;
  EXPECT_FALSE(SizeKvCache(in).ok());
}

TEST(KvSizingTest, UnknownMemoryAndContextUseTheFallbacks) {
  KvSizingInput in = Base();
  in.available_bytes = 0;
  in.trained_context = 0;  // 2048 tokens: 128 blocks per sequence
  in.max_num_seqs = 1000;  // 128000 full-context blocks > 4 GiB
  auto s = SizeKvCache(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->max_model_len, kFallbackContext);
  EXPECT_EQ(s->budget_bytes, kFallbackKvBytes);
}

TEST(KvSizingTest, RejectsBadInputs) {
  KvSizingInput in = Base();
  in.bytes_per_block = 0;
  EXPECT_FALSE(SizeKvCache(in).ok());
  in = Base();
  in.memory_fraction = 0;
  auto s = SizeKvCache(in);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("fraction"), std::string::npos);
  in.memory_fraction = 1.5;
  EXPECT_FALSE(SizeKvCache(in).ok());
  in = Base();
  in.max_num_seqs = 0;
  EXPECT_FALSE(SizeKvCache(in).ok());
}

TEST(KvSizingTest, ParsesMemAvailable) {
  EXPECT_EQ(ParseMemAvailable("MemTotal:       32000000 kB\nMemFree:  100 kB\n"
                              "MemAvailable:   16000000 kB\nBuffers: 1 kB\n"),
            int64_t{16000000} * 1024);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: 5 kB"), 5 * 1024);
  EXPECT_EQ(ParseMemAvailable("MemTotal: 5 kB\n"), std::nullopt);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: x kB\n"), std::nullopt);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: 5 MB\n"), std::nullopt);
  EXPECT_EQ(ParseMemAvailable(""), std::nullopt);
  EXPECT_GE(ReadAvailableMemory(), 0);
}

// gemma-3-270m's shape: 18 layers (every 6th global), 1 KV head of 256, window 512, f16 KV,
// trained context 32768. The hybrid layout's pages hold one group of 3 layers.
KvSizingInput Gemma270m(bool hybrid, int64_t chunk) {
  std::vector<int64_t> windows(18);
  for (int il = 0; il < 18; ++il) windows[il] = il % 6 < 5 ? 512 : 0;
  const model::KvLayout layout =
      hybrid ? model::KvLayout::Hybrid(windows) : model::KvLayout::Single(18);
  KvSizingInput in;
  in.bytes_per_block = static_cast<int64_t>(model::KvCache::BytesPerBlock(layout, 16, 1, 256));
  in.block_size = 16;
  in.trained_context = 32768;
  in.max_num_seqs = 8;
  in.group_windows = layout.group_window;
  in.max_chunk_tokens = chunk;
  return in;
}

TEST(KvSizingTest, SlidingGroupsCountOnlyTheirWindow) {
  KvSizingInput plain = Gemma270m(false, 2048), hybrid = Gemma270m(true, 2048);
  EXPECT_EQ(plain.bytes_per_block, 288 * 1024);  // 18 layers x 16 positions x 1 KiB
  EXPECT_EQ(hybrid.bytes_per_block, 48 * 1024);  // 3 layers
  // 100 MiB: 355 plain blocks hold 5680 tokens; 2133 pages hold the global group's blocks
  // plus 5 sliding groups x 161 (window 511 + chunk 2048 positions), 21248 tokens.
  plain.explicit_bytes = hybrid.explicit_bytes = 100 * kMiB;
  auto p = SizeKvCache(plain), h = SizeKvCache(hybrid);
  ASSERT_TRUE(p.ok() && h.ok());
  EXPECT_EQ(p->num_blocks, 355);
  EXPECT_EQ(p->max_model_len, 5680);
  EXPECT_EQ(h->num_blocks, 2133);
  EXPECT_EQ(h->max_model_len, (2133 - 5 * 161) * 16);
  EXPECT_TRUE(p->lowered && h->lowered);
  // Prefill chunks of 512 (tachyon run) leave the sliding groups 65 blocks each.
  KvSizingInput run = Gemma270m(true, 512);
  run.explicit_bytes = 100 * kMiB;
  auto r = SizeKvCache(run);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->max_model_len, (2133 - 5 * 65) * 16);
  // The default budget (8 full contexts) is the global group's 2048 blocks and 5 x 161 per
  // sequence: 1070 MiB instead of 4608 MiB.
  plain.explicit_bytes = hybrid.explicit_bytes = 0;
  plain.available_bytes = hybrid.available_bytes = 64 * kGiB;
  p = SizeKvCache(plain);
  h = SizeKvCache(hybrid);
  ASSERT_TRUE(p.ok() && h.ok());
  EXPECT_EQ(p->budget_bytes, int64_t{8} * 2048 * 288 * 1024);
  EXPECT_EQ(h->num_blocks, 8 * (2048 + 5 * 161));
  EXPECT_EQ(h->max_model_len, 32768);
  EXPECT_FALSE(h->lowered);
}

}  // namespace
// Method draft_model: the draft's pool comes out of the same budget and holds the same contexts.
TEST(KvSizingTest, DraftPoolSharesTheBudgetAndHoldsTheSameContexts) {
  KvSizingInput in = Base();
  in.draft_bytes_per_block = kMiB / 4;  // a draft with a quarter of the KV per token
  in.explicit_bytes = 500 * kMiB;
  auto s = SizeKvCache(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->num_blocks, 400);  // 500 MiB / 1.25 MiB
  EXPECT_EQ(s->draft_num_blocks, 400);
  EXPECT_EQ(s->budget_bytes, 500 * kMiB);
  EXPECT_EQ(s->max_model_len, 4096);
  EXPECT_FALSE(s->lowered);
  // Lowered: the context both pools hold.
  in.explicit_bytes = 125 * kMiB;
  s = SizeKvCache(in);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->num_blocks, 100);
  EXPECT_EQ(s->draft_num_blocks, 100);
  EXPECT_EQ(s->max_model_len, 1600);
  EXPECT_TRUE(s->lowered);
  // The default budget counts both pools' full contexts: 4 x 256 blocks x 1.25 MiB.
  in.explicit_bytes = 0;
  s = SizeKvCache(in);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->budget_bytes, 4 * 256 * (kMiB + kMiB / 4));
  EXPECT_EQ(s->draft_num_blocks, 4 * 256);
  // Explicit blocks are the target's; the draft pool comes on top.
  in.explicit_blocks = 300;
  s = SizeKvCache(in);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->num_blocks, 300);
  EXPECT_EQ(s->draft_num_blocks, 300);
  EXPECT_EQ(s->budget_bytes, 300 * (kMiB + kMiB / 4));
}

TEST(KvSizingTest, PlainDraftBesideAHybridTargetGetsTheBlocksAFullContextNeeds) {
  // gemma-3-270m's hybrid pages for the target; a plain draft of 6 layers x 1 KiB per position.
  KvSizingInput in = Gemma270m(true, 2048);
  in.draft_bytes_per_block = 6 * 16 * 1024;
  in.explicit_bytes = 100 * kMiB;
  auto s = SizeKvCache(in);
  ASSERT_TRUE(s.ok()) << s.status().message();
  // One full context: 2048 + 5 x 161 = 2853 target pages, 2048 draft blocks.
  const int64_t target_peak = 2048 + 5 * 161, draft_peak = 2048;
  EXPECT_EQ(s->draft_num_blocks, s->num_blocks * draft_peak / target_peak);
  EXPECT_LE(s->budget_bytes, 100 * kMiB);
  EXPECT_GT(s->budget_bytes, 99 * kMiB);
  EXPECT_TRUE(s->lowered);
  // The served context fits both pools.
  EXPECT_LE((s->max_model_len + 15) / 16, s->draft_num_blocks);
  EXPECT_LE(kv::PeakBlocksPerSequence(in.group_windows, 16, s->max_model_len, 2048),
            s->num_blocks);
}

}  // namespace tachyon::engine
