// MatMul: dispatch by weight type and SIMD level, activation conversion, threading.
#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <vector>

#include "kernels/matmul_internal.h"
#include "util/logging.h"

namespace tachyon::kernels {
namespace {

using internal::ActFormat;
using internal::DotFn;
using internal::QuantizeActFn;

// Bytes of weight rows swept per pass over the activation rows.
constexpr size_t kWeightTileBytes = 192 * 1024;

struct Impl {
  ActFormat act;
  QuantizeActFn quantize;  // null for kF32
  DotFn dot;
};

Impl MakeImpl(SimdLevel level, GgmlType type) {
  Impl impl{internal::ActFormatFor(type), nullptr, nullptr};
  if (level >= SimdLevel::kAvx512) {
    impl.dot = internal::DotAvx512Float(type);
    if (!impl.dot) impl.dot = internal::DotAvx512Block32(type);
    if (!impl.dot) impl.dot = internal::DotAvx512K(type);
    impl.quantize = internal::QuantizeActAvx512(impl.act);
  }
  if (level >= SimdLevel::kAvx2) {
    if (!impl.dot) impl.dot = internal::DotAvx2Float(type);
    if (!impl.dot) impl.dot = internal::DotAvx2Quant(type);
    if (!impl.quantize) impl.quantize = internal::QuantizeActAvx2(impl.act);
  }
  if (!impl.dot) impl.dot = internal::DotScalar(type);
  if (!impl.quantize) impl.quantize = internal::QuantizeActScalar(impl.act);
  return impl;
}

// Tables per level, built once.
const Impl& GetImpl(SimdLevel level, GgmlType type) {
  static const auto tables = [] {
    std::array<std::array<Impl, 64>, 3> t{};
    for (int l = 0; l < 3; ++l) {
      for (uint32_t ty = 0; ty < 64; ++ty) {
        if (GetTypeTraits(ty))
          t[l][ty] = MakeImpl(static_cast<SimdLevel>(l), static_cast<GgmlType>(ty));
      }
    }
    return t;
  }();
  return tables[static_cast<int>(level)][static_cast<uint32_t>(type)];
}

uint8_t* Scratch(size_t bytes) {
  thread_local std::vector<uint8_t> buf;
  if (buf.size() < bytes + 64) buf.resize(bytes + 64);
  auto p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<uint8_t*>((p + 63) & ~uintptr_t{63});
}

void RunRows(const Impl& impl, const Weight& w, const uint8_t* act, size_t stride, int64_t m,
             float* y, int64_t r0, int64_t r1) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = w.row_bytes ? w.row_bytes : RowBytes(w.type, w.cols);
  // A tile of weight rows (~kWeightTileBytes, L2) is swept once per group of kMaxRows
  // activation rows (L1), so neither side is re-read from far away.
  const int64_t wtile = std::max<int64_t>(1, static_cast<int64_t>(kWeightTileBytes / row_bytes));
  for (int64_t j0 = r0; j0 < r1; j0 += wtile) {
    const int64_t j1 = std::min(r1, j0 + wtile);
    for (int64_t i = 0; i < m; i += internal::kMaxRows) {
      const int nx = static_cast<int>(std::min<int64_t>(internal::kMaxRows, m - i));
      const uint8_t* a = act + static_cast<size_t>(i) * stride;
      for (int64_t j = j0; j < j1; ++j) {
        impl.dot(w.cols, base + static_cast<size_t>(j) * row_bytes, a, stride, nx,
                 y + i * w.rows + j, w.rows);
      }
    }
  }
}

}  // namespace

bool IsSupportedWeightType(GgmlType type) {
  return internal::DotScalar(type) != nullptr;
}

void MatMulAtLevel(SimdLevel level, const Weight& w, const float* x, int64_t m, float* y,
                   ThreadPool* pool) {
  CHECK(IsSupportedWeightType(w.type)) << "MatMul: unsupported weight type " << TypeName(w.type);
  const auto traits = GetTypeTraits(static_cast<uint32_t>(w.type));
  CHECK(w.cols % traits->block_size == 0) << "MatMul: cols not a multiple of the block";
  if (m <= 0 || w.rows <= 0) return;
  const Impl& impl = GetImpl(std::min(level, BestSimdLevel()), w.type);
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  size_t stride = static_cast<size_t>(w.cols) * sizeof(float);
  if (impl.act != ActFormat::kF32) {
    stride = internal::ActRowBytes(impl.act, w.cols);
    uint8_t* buf = Scratch(stride * static_cast<size_t>(m));
    auto convert = [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) impl.quantize(x + i * w.cols, w.cols, buf + i * stride);
    };
    if (pool && m >= 8) {
      pool->ParallelFor(m, convert);
    } else {
      convert(0, m);
    }
    act = buf;
  }
  auto work = [&](int64_t r0, int64_t r1) { RunRows(impl, w, act, stride, m, y, r0, r1); };
  // Tiny problems are not worth waking the workers.
  const bool parallel = pool && pool->num_threads() > 1 && w.rows >= 32 &&
                        static_cast<double>(w.rows) * static_cast<double>(w.cols) * m >= 65536;
  if (parallel) {
    pool->ParallelFor(w.rows, work, 16);
  } else {
    work(0, w.rows);
  }
}

void MatMul(const Weight& w, const float* x, int64_t m, float* y, ThreadPool* pool) {
  MatMulAtLevel(BestSimdLevel(), w, x, m, y, pool);
}

void MatMulReference(const Weight& w, const float* x, int64_t m, float* y) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  const auto* base = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = w.row_bytes ? w.row_bytes : RowBytes(w.type, w.cols);
  for (int64_t j = 0; j < w.rows; ++j) {
    DequantizeRow(w.type, base + static_cast<size_t>(j) * row_bytes, row.data(), w.cols);
    for (int64_t i = 0; i < m; ++i) {
      double s = 0;
      const float* xi = x + i * w.cols;
      for (int64_t c = 0; c < w.cols; ++c) s += static_cast<double>(row[c]) * xi[c];
      y[i * w.rows + j] = static_cast<float>(s);
    }
  }
}

}  // namespace tachyon::kernels
