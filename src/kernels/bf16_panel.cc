// bf16 weight panels (kernels/bf16_panel.h): the scalar reference and the dispatcher.
#include "kernels/bf16_panel.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <vector>

#include "kernels/bf16_panel_internal.h"
#include "tensor/fp16.h"
#include "util/logging.h"

namespace tachyon::kernels {
namespace {

void CheckPanelArgs(const Weight& w, int64_t t, int64_t k0, int64_t kc) {
  CHECK(kc > 0 && kc % 32 == 0 && k0 >= 0 && k0 % PanelKAlign(w.type) == 0 && k0 < w.cols)
      << "DequantPanelBf16: bad input range k0=" << k0 << " kc=" << kc << " cols=" << w.cols;
  CHECK(t >= 0 && 16 * t < w.rows)
      << "DequantPanelBf16: tile " << t << " past " << w.rows << " rows";
}

}  // namespace

int64_t PanelKAlign(GgmlType type) {
  // A table built once: the panel writers check k0 on every call (a few hundred ns of work),
  // and the type table lookup is a linear search.
  static const auto table = [] {
    std::array<int64_t, 64> t{};  // 0: unknown type
    for (uint32_t id = 0; id < t.size(); ++id) {
      if (const auto traits = GetTypeTraits(id)) t[id] = std::lcm<int64_t>(32, traits->block_size);
    }
    return t;
  }();
  const auto id = static_cast<uint32_t>(type);
  const int64_t align = id < table.size() ? table[id] : 0;
  CHECK(align > 0) << "PanelKAlign: unknown type " << id;
  return align;
}

namespace {

// Calls put(at, inside, v) for every panel element of tile t over [k0, k0 + kc): `at` its
// index in the panel layout, v DequantizeRow's float (0 where !inside: rows past w.rows,
// features past w.cols).
template <class Put>
void ForEachPanelValue(const Weight& w, int64_t t, int64_t k0, int64_t kc, Put put) {
  const auto traits = GetTypeTraits(static_cast<uint32_t>(w.type));
  const int64_t block = traits->block_size;
  // Whole blocks covering [k0, min(k0 + kc, cols)).
  const int64_t kend = std::min(k0 + kc, w.cols);
  const int64_t kdeq = (kend - k0 + block - 1) / block * block;
  const size_t row_bytes = w.row_bytes ? w.row_bytes : RowBytes(w.type, w.cols);
  const size_t off = static_cast<size_t>(k0 / block) * traits->type_size;
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(kdeq));
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t n = 0; n < 16; ++n) {
    const int64_t r = 16 * t + n;
    if (r < w.rows) {
      DequantizeRow(w.type, base + static_cast<size_t>(r) * row_bytes + off, row.data(), kdeq);
    }
    for (int64_t k = 0; k < kc; ++k) {
      const bool inside = r < w.rows && k0 + k < w.cols;
      put(static_cast<size_t>((k / 2) * 32 + 2 * n + k % 2), inside,
          inside ? row[static_cast<size_t>(k)] : 0.0f);
    }
  }
}

}  // namespace

void DequantPanelBf16Reference(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* dst) {
  CheckPanelArgs(w, t, k0, kc);
  ForEachPanelValue(w, t, k0, kc, [&](size_t at, bool inside, float v) {
    dst[at] = inside ? F32ToBf16(v) : 0;
  });
}

uint16_t Bf16SplitLow(float v, uint16_t hi) {
  if ((hi & 0x7F80u) == 0x7F80u) return 0;  // Inf / NaN
  return F32ToBf16(v - Bf16ToF32(hi));
}

void DequantPanelBf16SplitReference(const Weight& w, int64_t t, int64_t k0, int64_t kc,
                                    uint16_t* hi, uint16_t* lo) {
  CheckPanelArgs(w, t, k0, kc);
  ForEachPanelValue(w, t, k0, kc, [&](size_t at, bool inside, float v) {
    hi[at] = inside ? F32ToBf16(v) : 0;
    lo[at] = inside ? Bf16SplitLow(v, hi[at]) : 0;
  });
}

void DequantPanelBf16Split(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* hi,
                           uint16_t* lo) {
  static const bool avx512 = BestSimdLevel() >= SimdLevel::kAvx512;
  CheckPanelArgs(w, t, k0, kc);
  if (avx512 && internal::DequantPanelBf16SplitAvx512(w, t, k0, kc, hi, lo)) return;
  DequantPanelBf16SplitReference(w, t, k0, kc, hi, lo);
}

void DequantPanelBf16(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* dst) {
  // The panel code needs AVX-512 (BF16) only, no tile instructions: kAmx uses it too.
  static const bool avx512 = BestSimdLevel() >= SimdLevel::kAvx512;
  CheckPanelArgs(w, t, k0, kc);
  if (avx512 && internal::DequantPanelBf16Avx512(w, t, k0, kc, dst)) return;
  DequantPanelBf16Reference(w, t, k0, kc, dst);
}

}  // namespace tachyon::kernels
