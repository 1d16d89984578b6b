// The on-disk packed-weight cache through TensorSource, as the model loader uses it: a cold
// load writes it, a warm load maps exactly the bytes packing produces, and a stale, corrupt,
// truncated or foreign file is ignored (packed in memory again, then rewritten).
#include "model/pack_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "gguf/gguf.h"
#include "kernels/pack.h"
#include "model/weights.h"

namespace tachyon::model {
namespace {

namespace fs = std::filesystem;

struct TensorSpec {
  std::string name;
  GgmlType type;
  int64_t cols, rows;
};
const TensorSpec kTensors[] = {{"a.weight", GgmlType::kQ4_0, 256, 48},
                               {"b.weight", GgmlType::kF16, 70, 33},
                               {"c.weight", GgmlType::kQ6_K, 512, 17},
                               {"d.weight", GgmlType::kBF16, 64, 16}};

class PackCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("pack_cache_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    model_ = (dir_ / "model.gguf").string();
    options_.dir = (dir_ / "cache").string();
    options_.min_bytes = 0;
    options_.keep_free = 0;  // the tests must not depend on the machine's free space
    WriteModel(1);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A GGUF with kTensors holding random values drawn from `seed`.
  void WriteModel(uint32_t seed) {
    gguf::GgufWriter w;
    w.Set("general.architecture", gguf::Value::String("test"));
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    for (const TensorSpec& t : kTensors) {
      std::vector<uint8_t> data(RowBytes(t.type, t.cols) * t.rows);
      std::vector<float> row(t.cols);
      for (int64_t r = 0; r < t.rows; ++r) {
        for (float& v : row) v = nd(rng);
        kernels::QuantizeRow(t.type, row.data(), data.data() + r * RowBytes(t.type, t.cols),
                             t.cols);
      }
      ASSERT_TRUE(w.AddTensor(t.name, t.type, {t.cols, t.rows}, data.data(), data.size()).ok());
    }
    ASSERT_TRUE(w.WriteFile(model_).ok());
  }

  struct LoadResult {
    uint64_t packed = 0, from_cache = 0;
    std::string cache_path;
  };
  // Loads every tensor as the model loader does and checks each packed copy against packing
  // in memory, byte for byte.
  LoadResult Load(const PackCacheOptions& options) {
    LoadResult res;
    Result<gguf::GgufFile> file = gguf::GgufFile::Open(model_);
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    if (!file.ok()) return res;
    TensorSource src(*file, options);
    for (const TensorSpec& t : kTensors) {
      Result<kernels::Weight> w = src.Matrix(t.name, t.cols, t.rows);
      EXPECT_TRUE(w.ok()) << w.status().ToString();
      if (!w.ok()) continue;
      EXPECT_NE(w->packed, nullptr) << t.name;
      const size_t bytes = kernels::PackedBytes(t.type, t.rows, t.cols);
      kernels::AlignedBuffer want = kernels::AllocateAligned(bytes);
      kernels::PackWeight(*w, want.get(), nullptr);
      EXPECT_EQ(std::memcmp(w->packed, want.get(), bytes), 0) << t.name;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(w->packed) % 64, 0u) << t.name;
    }
    src.FinishLoad(/*wait=*/true);
    res.packed = src.bytes_packed();
    res.from_cache = src.bytes_from_cache();
    res.cache_path = src.pack_cache_path();
    return res;
  }

  // Rewrites `n` bytes at `offset` of `path`.
  static void Patch(const std::string& path, uint64_t offset, const std::string& bytes) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  fs::path dir_;
  std::string model_;
  PackCacheOptions options_;
};

TEST_F(PackCacheTest, ColdLoadWritesWarmLoadMapsTheSameBytes) {
  const LoadResult cold = Load(options_);
  EXPECT_GT(cold.packed, 0u);
  EXPECT_EQ(cold.from_cache, 0u);
  ASSERT_FALSE(cold.cache_path.empty());
  ASSERT_TRUE(fs::exists(cold.cache_path));
  EXPECT_EQ(fs::path(cold.cache_path).parent_path(), fs::path(options_.dir));
  const LoadResult warm = Load(options_);
  EXPECT_EQ(warm.cache_path, cold.cache_path);
  EXPECT_EQ(warm.from_cache, warm.packed);
  EXPECT_EQ(warm.packed, cold.packed);
  // No temporary files left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(options_.dir)) {
    ++files;
    EXPECT_EQ(e.path().extension(), ".tpack") << e.path();
  }
  EXPECT_EQ(files, 1);
}

TEST_F(PackCacheTest, StaleFileIsIgnoredAndRewritten) {
  const LoadResult first = Load(options_);
  // New tensor values, same header (same shapes and offsets): only the model's mtime tells.
  WriteModel(2);
  struct timespec times[2] = {{0, UTIME_OMIT}, {1000000000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, model_.c_str(), times, 0), 0);
  const LoadResult stale = Load(options_);  // checks the bytes against packing model 2
  EXPECT_EQ(stale.cache_path, first.cache_path);
  EXPECT_EQ(stale.from_cache, 0u);
  const LoadResult again = Load(options_);
  EXPECT_EQ(again.from_cache, again.packed);
}

TEST_F(PackCacheTest, CorruptFilesAreIgnored) {
  const LoadResult first = Load(options_);
  const std::string path = first.cache_path;
  const uint64_t size = fs::file_size(path);
  // A flipped byte in the first tensor's bytes (checksum), in the header, a cut-off file and
  // a file of garbage: each is a miss, the load is correct, and the file is rewritten.
  const std::vector<std::function<void()>> damage = {
      [&] { Patch(path, 4096 + 100, "\x5a"); },
      [&] { Patch(path, 20, "\x01\x02"); },
      [&] { fs::resize_file(path, size - 10); },
      [&] { fs::resize_file(path, 4096 + 7); },
      [&] {
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        f << std::string(10000, 'x');
      },
      [&] { fs::resize_file(path, 0); },
  };
  for (size_t i = 0; i < damage.size(); ++i) {
    damage[i]();
    const LoadResult bad = Load(options_);
    EXPECT_EQ(bad.from_cache, 0u) << "damage " << i;
    const LoadResult good = Load(options_);
    EXPECT_EQ(good.from_cache, good.packed) << "damage " << i;
  }
}

TEST_F(PackCacheTest, ConcurrentColdLoadsLeaveOneValidFile) {
  std::thread a([&] { Load(options_); });
  std::thread b([&] { Load(options_); });
  a.join();
  b.join();
  const LoadResult warm = Load(options_);
  EXPECT_EQ(warm.from_cache, warm.packed);
  int files = 0;
  for (const auto& e : fs::directory_iterator(options_.dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(PackCacheTest, AbandonedTemporaryFilesAreRemoved) {
  const std::string path = Load(options_).cache_path;
  const std::string old_tmp = path + ".tmp.abc123", new_tmp = path + ".tmp.def456";
  const std::string other = options_.dir + "/other.gguf-0123456789abcdef.tpack.tmp.xyz";
  for (const std::string& f : {old_tmp, new_tmp, other}) std::ofstream(f) << "partial";
  const auto old_time = fs::file_time_type::clock::now() - std::chrono::hours(1);
  fs::last_write_time(old_tmp, old_time);
  fs::last_write_time(other, old_time);
  Load(options_);
  EXPECT_FALSE(fs::exists(old_tmp));  // this model's, untouched for an hour
  EXPECT_TRUE(fs::exists(new_tmp));   // may be a writer at work
  EXPECT_TRUE(fs::exists(other));     // another model's: left to its own loads
}

TEST_F(PackCacheTest, DisabledOrTooSmallWritesNothing) {
  PackCacheOptions off;  // empty dir
  EXPECT_EQ(Load(off).cache_path, "");
  PackCacheOptions big = options_;
  big.min_bytes = uint64_t{1} << 40;
  const LoadResult r = Load(big);
  EXPECT_FALSE(r.cache_path.empty());
  EXPECT_FALSE(fs::exists(r.cache_path));
  EXPECT_EQ(r.from_cache, 0u);
  PackCacheOptions full = options_;
  full.keep_free = uint64_t{1} << 62;  // more than any file system has
  const LoadResult f = Load(full);
  EXPECT_FALSE(fs::exists(f.cache_path));
  EXPECT_EQ(f.from_cache, 0u);
}

TEST_F(PackCacheTest, OptionsFromEnvironment) {
  const char* saved = std::getenv("TACHYON_PACK_CACHE");
  const std::string keep = saved ? saved : "";
  ::setenv("TACHYON_PACK_CACHE", "0", 1);
  EXPECT_EQ(PackCacheOptions::FromEnv().dir, "");
  ::setenv("TACHYON_PACK_CACHE", "off", 1);
  EXPECT_EQ(PackCacheOptions::FromEnv().dir, "");
  ::setenv("TACHYON_PACK_CACHE", "/some/dir", 1);
  EXPECT_EQ(PackCacheOptions::FromEnv().dir, "/some/dir");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string keep_xdg = xdg ? xdg : "";
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  ::setenv("TACHYON_PACK_CACHE", "1", 1);  // "on": the default folder, not "./1"
  EXPECT_EQ(PackCacheOptions::FromEnv().dir, "/xdg/tachyon/packed");
  ::unsetenv("TACHYON_PACK_CACHE");
  EXPECT_EQ(PackCacheOptions::FromEnv().dir, "/xdg/tachyon/packed");
  if (xdg) {
    ::setenv("XDG_CACHE_HOME", keep_xdg.c_str(), 1);
  } else {
    ::unsetenv("XDG_CACHE_HOME");
  }
  if (saved) ::setenv("TACHYON_PACK_CACHE", keep.c_str(), 1);
}

}  // namespace
}  // namespace tachyon::model
