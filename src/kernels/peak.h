// The machine's int8 multiply-add peak, measured (for benchmark ratios, not for dispatch).
//
// `tachyon bench` reports prefill and batched decode as a fraction of the int8 compute
// roofline measured in the same run: every pool thread runs independent chains of the widest
// int8 dot-product instruction the CPU has (AVX-512 VNNI vpdpbusd on zmm; AVX2 vpmaddubsw +
// vpmaddwd without VNNI), and the rate counts 2 ops (a multiply and an add) per byte product.
#pragma once

#include <string>

#include "util/thread_pool.h"

namespace tachyon::kernels {

struct ComputePeak {
  double int8_gops = 0;  // 0 when the CPU has no SIMD int8 dot product (scalar builds)
  std::string int8_instr;  // "avx512-vnni vpdpbusd", "avx2 vpmaddubsw", or "none"
};

// Best of `runs` timed runs of ~`ms_per_run` ms each on all of `pool`'s threads.
ComputePeak MeasureComputePeak(ThreadPool* pool, int runs = 5, double ms_per_run = 20);

namespace internal {
// Independent chains over `iters` iterations; returns a value that depends on every result
// (so the loop is not optimised away). Ops per iteration: kPeakOpsPerIter*.
int PeakInt8Avx512(int64_t iters);
int PeakInt8Avx2(int64_t iters);
inline constexpr double kPeakOpsPerIterAvx512 = 12.0 * 64 * 2;  // 12 vpdpbusd zmm
inline constexpr double kPeakOpsPerIterAvx2 = 6.0 * 32 * 2;     // 6 vpmaddubsw ymm chains
}  // namespace internal

}  // namespace tachyon::kernels
