#include "engine/engine_core.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/testing/test_harness.h"

namespace tachyon::engine {
namespace {

using testing::Greedy;
using testing::Harness;
using testing::MakePrompt;

EngineConfig CoreConfig(int num_blocks = 128) {
  EngineConfig c;
  c.kv.num_blocks = num_blocks;
  c.kv.block_size = 4;
  c.scheduler.max_num_batched_tokens = 16;
  c.scheduler.max_num_seqs = 8;
  c.max_model_len = 4096;
  return c;
}

std::unique_ptr<EngineCore> NewCore(const EngineConfig& c) {
  return std::move(EngineCore::Create(c, std::make_unique<FakeModelExecutor>(64, c.kv.num_blocks,
                                                                             c.kv.block_size)))
      .value();
}

struct Collected {
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::kNone;
  int outputs = 0;
  Usage usage;
};

Collected Drain(RequestStream& s) {
  Collected c;
  while (auto o = s.Next()) {
    c.tokens.insert(c.tokens.end(), o->token_ids.begin(), o->token_ids.end());
    if (o->finish_reason != FinishReason::kNone) c.finish = o->finish_reason;
    ++c.outputs;
    c.usage = o->usage;
  }
  return c;
}

// A fake model whose steps the test lets through one permit at a time, so the test knows the
// engine is mid-generation when it acts.
class GatedExecutor : public FakeModelExecutor {
 public:
  using FakeModelExecutor::FakeModelExecutor;
  Status Execute(const model::Batch& batch, std::span<float> logits) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return permits_ > 0; });
      --permits_;
    }
    return FakeModelExecutor::Execute(batch, logits);
  }
  void Allow(int64_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      permits_ += n;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t permits_ = 0;
};

std::unique_ptr<EngineCore> NewGatedCore(const EngineConfig& c, GatedExecutor** gate) {
  auto exec = std::make_unique<GatedExecutor>(64, c.kv.num_blocks, c.kv.block_size);
  *gate = exec.get();
  return std::move(EngineCore::Create(c, std::move(exec))).value();
}

template <typename Pred>
bool WaitUntil(Pred pred) {  // bounded wait for the engine thread to catch up
  for (int i = 0; i < 5000 && !pred(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return pred();
}

TEST(EngineCoreTest, ConcurrentClientsGetTheSameOutputsAsTheSequentialEngine) {
  auto core = NewCore(CoreConfig(40));  // tight pool: preemptions happen too
  constexpr int kThreads = 4, kPerThread = 4;
  std::vector<std::vector<Collected>> got(kThreads, std::vector<Collected>(kPerThread));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) {
        const int i = t * kPerThread + k;
        auto stream = core->AddRequest(Greedy(MakePrompt(5 + 7 * i % 50, i), 4 + i % 9));
        ASSERT_TRUE(stream.ok());
        got[t][k] = Drain(**stream);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    Harness ref;
    ASSERT_TRUE(ref.Add(0, Greedy(MakePrompt(5 + 7 * i % 50, i), 4 + i % 9)).ok());
    ref.RunToCompletion();
    const Collected& c = got[i / kPerThread][i % kPerThread];
    EXPECT_EQ(c.tokens, ref.result(0).tokens) << "request " << i;
    EXPECT_EQ(c.finish, FinishReason::kLength);
    EXPECT_EQ(c.usage.completion_tokens, 4 + i % 9);
  }
  ASSERT_TRUE(WaitUntil([&] { return core->Metrics().requests_finished == 16; }));
  EngineMetrics m = core->Metrics();
  EXPECT_EQ(m.kv.used_blocks, 0);
  EXPECT_EQ(m.generation_tokens, [] {
    int64_t n = 0;
    for (int i = 0; i < 16; ++i) n += 4 + i % 9;
    return n;
  }());
}

TEST(EngineCoreTest, AbortMidGenerationFreesBlocks) {
  GatedExecutor* gate = nullptr;
  auto core = NewGatedCore(CoreConfig(), &gate);
  EngineRequest r = Greedy(MakePrompt(20, 1), 400);
  r.params.ignore_eos = true;
  std::atomic<int> notified{0};
  auto stream = core->AddRequest(r, [&] { ++notified; });
  ASSERT_TRUE(stream.ok());
  gate->Allow(4);  // 2 prefill chunks + 2 decode steps: 3 tokens
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*stream)->Next().has_value());
  core->Abort((*stream)->request_id());
  gate->Allow(1000000);
  Collected rest = Drain(**stream);
  EXPECT_EQ(rest.finish, FinishReason::kAbort);
  ASSERT_TRUE(WaitUntil([&] { return core->Metrics().requests_aborted == 1; }));
  EXPECT_GE(notified.load(), 4);  // notifiers ran before the metrics snapshot
  EngineMetrics m = core->Metrics();
  EXPECT_EQ(m.kv.used_blocks, 0);
  EXPECT_EQ(m.num_running + m.num_waiting, 0);
  core->Abort(12345);  // unknown: ignored
}

TEST(EngineCoreTest, ManyAddAbortCyclesLeaveThePoolAsItStarted) {
  auto core = NewCore(CoreConfig(64));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 200; ++i) {
    EngineRequest r = Greedy(MakePrompt(1 + i % 37, i), 1 + i % 23);
    r.params.n = 1 + i % 2;
    auto s = core->AddRequest(r);
    ASSERT_TRUE(s.ok());
    if (i % 3 != 2) core->Abort((*s)->request_id());
    streams.push_back(*s);
  }
  for (auto& s : streams) {
    Collected c = Drain(*s);
    EXPECT_NE(c.finish, FinishReason::kNone);
    EXPECT_NE(c.finish, FinishReason::kError);
  }
  ASSERT_TRUE(WaitUntil([&] { return core->Metrics().requests_finished == 200; }));
  EngineMetrics m = core->Metrics();
  EXPECT_EQ(m.kv.used_blocks, 0);
  EXPECT_EQ(m.kv.free_blocks, 64);
}

TEST(EngineCoreTest, InvalidRequestsFailUpFront) {
  auto core = NewCore(CoreConfig());
  auto bad = core->AddRequest(Greedy({}, 4));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EngineRequest r = Greedy(MakePrompt(4, 1), 4);
  r.params.stop = {"x"};  // no detokenizer configured
  EXPECT_FALSE(core->AddRequest(r).ok());
  EngineRequest big = Greedy(MakePrompt(4, 1), 100000);
  EXPECT_FALSE(core->AddRequest(big).ok());
}

TEST(EngineCoreTest, StopAbortsInFlightAndRefusesNewRequests) {
  GatedExecutor* gate = nullptr;
  auto core = NewGatedCore(CoreConfig(), &gate);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; ++i) {
    EngineRequest r = Greedy(MakePrompt(10, i), 100);
    r.params.ignore_eos = true;
    streams.push_back(*core->AddRequest(r));
  }
  gate->Allow(3);
  ASSERT_TRUE(streams[0]->Next().has_value());
  // Stop while the engine thread waits inside a step; it must finish that step, then abort.
  std::thread stopper([&] { core->Stop(); });
  ASSERT_TRUE(WaitUntil([&] {
    auto probe = core->AddRequest(Greedy(MakePrompt(4, 1), 4));
    return !probe.ok() && probe.status().code() == StatusCode::kUnavailable;
  }));
  gate->Allow(1000000);
  stopper.join();
  for (auto& s : streams) {
    EXPECT_TRUE(s->finished());
    EXPECT_EQ(Drain(*s).finish, FinishReason::kAbort);
  }
  auto late = core->AddRequest(Greedy(MakePrompt(4, 1), 4));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
  core->Stop();  // idempotent
}

TEST(EngineCoreTest, StreamTryNextAndNextFor) {
  auto core = NewCore(CoreConfig());
  auto s = *core->AddRequest(Greedy(MakePrompt(6, 2), 3));
  int outputs = 0;
  bool finished = false;
  while (!finished) {
    auto o = s->NextFor(std::chrono::milliseconds(50));
    if (!o) o = s->TryNext();
    if (!o) continue;
    ++outputs;
    finished = o->finished;
  }
  EXPECT_EQ(outputs, 3);
  EXPECT_FALSE(s->TryNext().has_value());
  EXPECT_FALSE(s->Next().has_value());  // after the final output: ends immediately
}

TEST(EngineCoreTest, BurstOfRequestsStartsInOneStepOrNotAtAll) {
  EngineConfig c = CoreConfig();
  c.scheduler.max_num_batched_tokens = 64;  // room for every prompt in the first step
  auto core = NewCore(c);
  std::atomic<int> finished{0};
  std::vector<std::pair<EngineRequest, std::function<void(RequestOutput)>>> burst;
  for (int i = 0; i < 6; ++i) {
    burst.emplace_back(Greedy(MakePrompt(7, i), 5), [&](RequestOutput o) {
      if (o.finished) ++finished;
    });
  }
  auto ids = core->AddRequestsWithCallbacks(std::move(burst));
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_EQ(ids->size(), 6u);
  ASSERT_TRUE(WaitUntil([&] { return finished.load() == 6 && core->Metrics().num_steps == 5; }));
  // They all arrived before the same step: 5 tokens each took exactly 5 steps in all.
  EXPECT_EQ(core->Metrics().num_steps, 5);

  // One invalid request (empty prompt) rejects the whole burst, naming its index.
  std::vector<std::pair<EngineRequest, std::function<void(RequestOutput)>>> bad;
  bad.emplace_back(Greedy(MakePrompt(7, 1), 5), [](RequestOutput) {});
  bad.emplace_back(Greedy({}, 5), [](RequestOutput) {});
  auto rejected = core->AddRequestsWithCallbacks(std::move(bad));
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.status().message().find("request 1"), std::string::npos)
      << rejected.status().ToString();
  EXPECT_EQ(core->Metrics().num_waiting + core->Metrics().num_running, 0);
}

}  // namespace
}  // namespace tachyon::engine

namespace tachyon::engine {
namespace {

TEST(EngineCoreTest, CallbackDeliveryAndQueueTime) {
  auto core = NewCore(CoreConfig());
  std::mutex mu;
  std::vector<RequestOutput> got;
  std::atomic<bool> done{false};
  auto id = core->AddRequestWithCallback(Greedy(MakePrompt(9, 3), 5), [&](RequestOutput o) {
    std::lock_guard<std::mutex> lock(mu);
    if (o.finished) done = true;
    got.push_back(std::move(o));
  });
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(WaitUntil([&] { return done.load(); }));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(got.size(), 5u);
  for (const RequestOutput& o : got) {
    EXPECT_EQ(o.request_id, *id);
    EXPECT_GE(o.queue_seconds, 0.0);
  }
  EXPECT_EQ(got.back().finish_reason, FinishReason::kLength);
  EXPECT_EQ(got.back().usage.completion_tokens, 5);
}

}  // namespace
}  // namespace tachyon::engine

namespace tachyon::engine {
namespace {

TEST(EngineCoreTest, AnOutputsStepIsInTheMetricsWhenTheOutputArrives) {
  auto core = NewCore(CoreConfig());
  std::mutex mu;
  std::vector<EngineMetrics> seen;  // Metrics() as each output arrives
  std::atomic<bool> finished{false};
  auto id = core->AddRequestWithCallback(Greedy(MakePrompt(7, 10), 3), [&](RequestOutput o) {
    EngineMetrics m = core->Metrics();
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(m);
    if (o.finished) finished = true;
  });
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return finished.load(); }));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 3u);  // one output a step: the prompt's with the first token, then two
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].num_steps, static_cast<int64_t>(i + 1)) << "output " << i;
    EXPECT_EQ(seen[i].generation_tokens, static_cast<int64_t>(i + 1)) << "output " << i;
  }
  EXPECT_EQ(seen.back().requests_finished, 1);
}

TEST(EngineCoreTest, DroppingTheStreamAbortsTheRequest) {
  GatedExecutor* gate = nullptr;
  auto core = NewGatedCore(CoreConfig(), &gate);
  EngineRequest r = Greedy(MakePrompt(12, 4), 400);
  r.params.ignore_eos = true;
  {
    auto s = core->AddRequest(r);
    ASSERT_TRUE(s.ok());
    gate->Allow(2);
    ASSERT_TRUE((*s)->Next().has_value());
  }  // the consumer goes away mid-generation
  gate->Allow(1000000);
  ASSERT_TRUE(WaitUntil([&] { return core->Metrics().requests_aborted == 1; }));
  EngineMetrics m = core->Metrics();
  EXPECT_EQ(m.kv.used_blocks, 0);
  EXPECT_LT(m.generation_tokens, 400);
}

// Burst gathering (EngineConfig::burst_gather_quiet / _max).
EngineConfig GatherConfig(std::chrono::milliseconds quiet, std::chrono::milliseconds max) {
  EngineConfig c = CoreConfig();
  c.scheduler.max_num_batched_tokens = 64;  // room for every prompt in the first step
  c.burst_gather_quiet = quiet;
  c.burst_gather_max = max;
  return c;
}

TEST(EngineCoreTest, RequestsReachingAnIdleEngineApartStartInOneStep) {
  // The engine waits for a second of quiet; the requests come 50 ms apart, one at a time.
  auto core = NewCore(GatherConfig(std::chrono::seconds(1), std::chrono::seconds(60)));
  std::atomic<int> finished{0};
  for (int i = 0; i < 4; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(core->AddRequestWithCallback(Greedy(MakePrompt(7, i), 5),
                                             [&](RequestOutput o) {
                                               if (o.finished) ++finished;
                                             })
                    .ok());
  }
  ASSERT_TRUE(WaitUntil([&] { return finished.load() == 4; }));
  // One first step for all of them: 5 tokens each took exactly 5 steps in all (without the
  // gathering, the first request's first step runs alone: 6 or more).
  EXPECT_EQ(core->Metrics().num_steps, 5);
}

TEST(EngineCoreTest, BurstGatherEndsAtItsBound) {
  auto core = NewCore(GatherConfig(std::chrono::minutes(10), std::chrono::milliseconds(20)));
  auto s = core->AddRequest(Greedy(MakePrompt(7, 1), 3));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(WaitUntil([&] { return core->Metrics().requests_finished == 1; }));
  EXPECT_EQ(Drain(**s).finish, FinishReason::kLength);
}

TEST(EngineCoreTest, AnAbortEndsTheGatherAndABusyEngineTakesNewcomersAtOnce) {
  // Quiet and bound of ten minutes: only the abort ends the first gathering, and the request
  // added while the engine is busy would wait that long if a busy engine gathered.
  GatedExecutor* gate = nullptr;
  auto core = NewGatedCore(GatherConfig(std::chrono::minutes(10), std::chrono::minutes(10)), &gate);
  EngineRequest long_one = Greedy(MakePrompt(7, 1), 400);
  long_one.params.ignore_eos = true;
  auto a = core->AddRequest(long_one);
  auto b = core->AddRequest(Greedy(MakePrompt(7, 2), 3));
  ASSERT_TRUE(a.ok() && b.ok());
  core->Abort((*b)->request_id());
  gate->Allow(2);
  ASSERT_TRUE(WaitUntil([&] { return core->Metrics().generation_tokens == 2; }));
  EXPECT_EQ(core->Metrics().requests_aborted, 1);
  auto c = core->AddRequest(Greedy(MakePrompt(7, 3), 3));
  ASSERT_TRUE(c.ok());
  gate->Allow(1000000);
  EXPECT_EQ(Drain(**c).finish, FinishReason::kLength);
  EXPECT_EQ(Drain(**a).finish, FinishReason::kLength);
}

TEST(EngineCoreTest, StopEndsABurstGather) {
  auto core = NewCore(GatherConfig(std::chrono::minutes(10), std::chrono::minutes(10)));
  auto s = core->AddRequest(Greedy(MakePrompt(7, 1), 3));
  ASSERT_TRUE(s.ok());
  core->Stop();
  EXPECT_EQ(Drain(**s).finish, FinishReason::kAbort);
}

TEST(EngineCoreTest, NegativeBurstGatherIsRefused) {
  EngineConfig c = GatherConfig(std::chrono::milliseconds(-1), std::chrono::milliseconds(5));
  EXPECT_FALSE(EngineCore::Create(
                   c, std::make_unique<FakeModelExecutor>(64, c.kv.num_blocks, c.kv.block_size))
                   .ok());
}

}  // namespace
}  // namespace tachyon::engine
