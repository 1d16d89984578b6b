// Helpers shared by the model tests (header-only; not part of the library).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model.h"

namespace tachyon::model::testing {

// A raw little-endian float32 file (empty if unreadable).
inline std::vector<float> ReadF32(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return {};
  const std::streamsize size = f.tellg();
  std::vector<float> v(static_cast<size_t>(size) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// Block table of consecutive ids [first, first + n).
inline std::vector<int32_t> Blocks(int32_t first, int64_t n) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = first + static_cast<int32_t>(i);
  return t;
}

// Runs `ids` as one sequence in one batch (positions 0..n-1) and returns every position's
// logits, [n, n_vocab]. The KV cache is f32 unless asked otherwise: the outside references
// were computed with an f32 KV cache.
inline std::vector<float> AllLogits(Model& model, const std::vector<int32_t>& ids, ThreadPool* pool,
                                    int64_t block_size = kDefaultBlockSize,
                                    KvDtype dtype = KvDtype::kF32) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t nb = (n + block_size - 1) / block_size;
  auto kv = model.CreateKvCache(nb + 1, block_size, dtype);
  EXPECT_TRUE(kv.ok()) << kv.status().ToString();
  Batch b;
  b.tokens = ids;
  // Shift the blocks by one so block 0 is never used: catches table/slot mix-ups.
  b.seqs.push_back({0, n, 0, Blocks(1, nb), n});
  ForwardOutput out;
  Status st = model.Forward(b, kv->get(), pool, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return std::vector<float>(out.logits.begin(), out.logits.begin() + n * out.n_vocab);
}

inline float MaxAbsDiff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace tachyon::model::testing
