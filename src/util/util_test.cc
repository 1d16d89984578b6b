#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>

#include <sys/stat.h>

#include "util/cpu_features.h"
#include "util/json_text.h"
#include "util/mmap_file.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace tachyon {
namespace {

Result<int> ParsePositive(int x) {
  if (x <= 0) return InvalidArgument("not positive");
  return x;
}

Status UseMacros(int x, int* out) {
  ASSIGN_OR_RETURN(int v, ParsePositive(x));
  RETURN_IF_ERROR(v > 100 ? InvalidArgument("too big") : OkStatus());
  *out = v;
  return OkStatus();
}

TEST(Status, CodesAndHttp) {
  Status s = NotFound("x");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "NOT_FOUND: x");
  EXPECT_EQ(HttpStatus(s.code()), 404);
  EXPECT_EQ(HttpStatus(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatus(StatusCode::kPayloadTooLarge), 413);
  EXPECT_EQ(s.WithContext("file.gguf").message(), "file.gguf: x");
}

TEST(Result, ValueAndError) {
  int out = 0;
  EXPECT_TRUE(UseMacros(5, &out).ok());
  EXPECT_EQ(out, 5);
  EXPECT_EQ(UseMacros(-1, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(UseMacros(500, &out).message(), "too big");
  Result<std::string> r = std::string("abc");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 3u);
  Result<std::string> bad = Status();  // an OK status cannot make an error Result
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
}

TEST(MmapFile, MapsAndErrors) {
  const std::string path = ::testing::TempDir() + "/mmap_test.bin";
  {
    std::ofstream f(path, std::ios::binary);
    f << "hello";
  }
  auto m = MmapFile::Open(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->data()), 5), "hello");
  MmapFile moved = std::move(m).value();
  EXPECT_EQ(moved.size(), 5u);
  auto missing = MmapFile::Open(path + ".nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(".nope"), std::string::npos);
  EXPECT_FALSE(MmapFile::Open(::testing::TempDir()).ok());
  std::remove(path.c_str());
  // A FIFO (e.g. a model file replaced by one) is refused at once, not waited on for a writer.
  const std::string fifo = ::testing::TempDir() + "/mmap_test.fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto piped = MmapFile::Open(fifo);
  EXPECT_FALSE(piped.ok());
  EXPECT_NE(piped.status().message().find("not a regular file"), std::string::npos);
  std::remove(fifo.c_str());
}

// Model files' JSON: a nesting past kMaxJsonDepth is refused before nlohmann builds (and
// recursively copies or prints) it, with the file named.
TEST(JsonText, DocumentsAreBoundedInDepth) {
  auto ok = ParseJsonDocument(R"({"a": [1, {"b": null}]})", "x.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)["a"][1].size(), 1u);
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(ParseJsonDocument(at_limit, "x.json").ok());
  const std::string deep = "{\"a\": " + std::string(300000, '[') + std::string(300000, ']') + "}";
  auto refused = ParseJsonDocument(deep, "dir/tokenizer.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("dir/tokenizer.json: the JSON nests deeper"),
            std::string::npos)
      << refused.status().message();
  // Brackets inside strings do not count.
  EXPECT_TRUE(ParseJsonDocument("[\"" + std::string(1000, '[') + "\"]", "x.json").ok());
  auto bad = ParseJsonDocument("{\"a\": ", "dir/config.json");
  EXPECT_NE(bad.status().message().find("dir/config.json: not valid JSON"), std::string::npos);
}

TEST(CpuFeatures, Consistent) {
  const CpuFeatures& f = DetectedCpuFeatures();
  if (f.HasAvx512Set()) {
    EXPECT_TRUE(f.HasAvx2Set());
  }
  EXPECT_FALSE(f.ToString().empty());
  EXPECT_NE(SimdLevelName(BestSimdLevel()), nullptr);
}

TEST(ThreadPool, RunAndParallelFor) {
  for (int nt : {1, 2, 3, 4}) {
    ThreadPool pool(nt);
    std::atomic<int> calls{0};
    pool.Run([&](int tid, int n) {
      EXPECT_EQ(n, nt);
      EXPECT_LT(tid, n);
      calls++;
    });
    EXPECT_EQ(calls.load(), nt);
    for (int64_t n : {1, 2, 3, 7, 17, 1023}) {
      std::vector<std::atomic<int>> hit(n);
      for (int rep = 0; rep < 50; ++rep) {
        pool.ParallelFor(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hit[i]++;
        }, 4);
      }
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hit[i].load(), 50) << n << " " << i;
    }
  }
}

TEST(ThreadPool, NestedRunsSerially) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.Run([&](int, int) { pool.ParallelFor(10, [&](int64_t b, int64_t e) { inner += e - b; }); });
  EXPECT_EQ(inner.load(), 20);
}

// Stats count the Runs of more than one thread while enabled, and their parts' times add up
// to no more than the threads' time inside Run.
TEST(ThreadPool, StatsCountRunsWhileEnabled) {
  ThreadPool pool(2);
  auto spin = [](int, int) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    while (std::chrono::steady_clock::now() < end) {
    }
  };
  pool.Run(spin);
  EXPECT_EQ(pool.stats().runs, 0);  // off by default
  pool.SetStatsEnabled(true);
  for (int i = 0; i < 5; ++i) pool.Run(spin);
  pool.ParallelFor(1, [](int64_t, int64_t) {});  // one chunk: runs inline, not a Run
  ThreadPool::Stats s = pool.stats();
  EXPECT_EQ(s.runs, 5);
  EXPECT_LE(s.worker_runs, 5);
  EXPECT_GE(s.caller_work_s + s.worker_work_s, 10 * 200e-6);  // 10 parts of >= 200 us
  EXPECT_LE(s.caller_work_s + s.join_wait_s, s.run_s * (1 + 1e-9));
  EXPECT_LE(s.worker_work_s, s.run_s * (1 + 1e-9));
  EXPECT_GE(s.join_wait_s, 0.0);
  pool.ResetStats();
  EXPECT_EQ(pool.stats().runs, 0);
  EXPECT_EQ(pool.stats().worker_work_s, 0.0);
  pool.SetStatsEnabled(false);
  pool.Run(spin);
  EXPECT_EQ(pool.stats().runs, 0);
}

}  // namespace
}  // namespace tachyon
