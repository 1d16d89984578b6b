// AMX-BF16 GEMM behind MatMul for several activation rows (declarations and the layout in
// kernels/matmul_internal.h; design, blocking and measured rates in docs/kernels.md).
//
// Activations are tile-major: the bf16 values of rows 16q .. 16q + 15 and inputs 32s ..
// 32s + 31 are one 1 KiB A tile at act + (q * steps + s) KiB (steps = cols / 32 rounded up),
// so a block reads its A tiles from consecutive KiB (four streams the hardware prefetchers
// follow) rather than from 16 rows 2 * cols bytes apart.
//
// Tiles (one configuration, all 16 rows x 64 bytes): C(a, b) = tile 2a + b (16 activation
// rows x 16 weight rows of f32), A(a) = tile 4 + a (16 activation rows x 32 bf16),
// B(b) = tile 6 + b (one KiB of a bf16 weight panel: 32 input features x 16 weight rows).
// A block of up to 2 x 2 C tiles runs TDPBF16PS over one K chunk; C lives in y between
// chunks (a 16 x 16 scratch tile where the block overhangs m or w.rows).
//
// F32 / F16 weights (AmxSplitType) split both operands into bf16 pairs, v = hi + lo: hi and lo
// weight panels (DequantPanelBf16Split) and hi and lo activation rows, and every step runs
// A_hi·B_hi + A_hi·B_lo + A_lo·B_hi into the same f32 tiles (3 TDPBF16PS per tile step; the
// error bound is derived in matmul_amx_test.cc). Their K chunk is halved so that the four
// panels of a block take the space of two.
#include "kernels/simd_avx512.h"  // first: GCC 12's AVX-512 header warnings (see there)

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/amx.h"
#include "kernels/bf16_panel.h"
#include "kernels/matmul_internal.h"
#include "kernels/pack.h"

namespace tachyon::kernels::internal {
namespace {

// Input features per K chunk (where the activations [m, cols] exceed half of the activation
// chunk): C stays in its tiles for kc / 32 steps of a block, then goes out to the accumulation
// buffer and back, so a longer chunk spends fewer tile loads and stores on C; the two panels
// (2 x 64 KiB) then come from L2 as the activations do. Measured in alternating same-process
// 2-thread runs at m = 512: 1024 beat 512 by 1.01-1.16x, and 2048 beat 1024 at cols = 2048
// (whole rows, no accumulation buffer) by 1.07-1.18x for Q4_0 / Q8_0 / Q4_K, even at cols =
// 8192. A multiple of 256, so every chunk start is PanelKAlign-aligned for every type.
constexpr int64_t kAmxKChunk = 2048;
// Activation bytes per row chunk kept in L2 (256 rows at kc = 2048; rows beyond it are a
// further sweep, which dequantizes the panels again: at m = 512 twice, a few % of the time).
constexpr size_t kAmxActChunkBytes = 1 << 20;
// The split types (F32, F16: hi and lo activations and panels, three multiplies per step)
// measured best at a quarter of the K chunk and half the activation chunk (kc = 512,
// 256 rows): longer chunks or more rows lost 3-27% there.
constexpr int64_t kAmxSplitKChunk = kAmxKChunk / 4;
constexpr size_t kAmxSplitActChunkBytes = kAmxActChunkBytes / 2;
// Between K chunks the partial sums of a group of weight tiles wait in a compact thread-local
// buffer ([tile][row][16] f32, each C tile 1 KiB contiguous) rather than in y, whose rows lie
// 4 * w.rows bytes apart (a TLB miss and a far cache line per tile row): up to this many bytes.
constexpr size_t kAmxAccBytes = 1 << 20;

const TileConfig& Config() {
  static const TileConfig cfg = [] {
    TileConfig c;
    for (int i = 0; i < kAmxTiles; ++i) c.Set(i, 16, 64);
    return c;
  }();
  return cfg;
}

struct AmxAccScratch;  // ThreadScratch tags
struct AmxSetScratch;

// Where one C tile is loaded from / stored to.
struct CTile {
  float* p;
  size_t ld;  // bytes
};

// GCC's tile intrinsics paste the tile number into the instruction text: it must be a literal.
#define TACHYON_LOAD_OR_ZERO(tile, cin)                 \
  do {                                                  \
    if (cin) {                                          \
      _tile_loadd(tile, (cin)[tile].p, (cin)[tile].ld); \
    } else {                                            \
      _tile_zero(tile);                                 \
    }                                                   \
  } while (0)

// The step body for one pair of operands (A rows at a / a1, panels at b / b1): C += A · B.
#define TACHYON_STEP(a, a1, b, b1)                     \
  do {                                                 \
    _tile_loadd(4, (a) + 1024 * s, 64);                \
    _tile_loadd(6, (b) + 1024 * s, 64);                \
    _tile_dpbf16ps(0, 4, 6);                           \
    if constexpr (kNb == 2) {                          \
      _tile_loadd(7, (b1) + 1024 * s, 64);             \
      _tile_dpbf16ps(1, 4, 7);                         \
    }                                                  \
    if constexpr (kMa == 2) {                          \
      _tile_loadd(5, (a1) + 1024 * s, 64);             \
      _tile_dpbf16ps(2, 5, 6);                         \
      if constexpr (kNb == 2) _tile_dpbf16ps(3, 5, 7); \
    }                                                  \
  } while (0)

// The panels of one pair of weight tiles over one K chunk, converted a piece at a time (a
// piece: PanelKAlign(type) inputs of one tile), so that the next pair's panels are written
// between the tile steps of the current pair's blocks: the vector units convert while the
// tile unit multiplies (Block runs Run() after a step's tile instructions are issued).
struct PanelJob {
  const Weight* w = nullptr;
  bool split = false;
  int64_t t = -1, k0 = 0, kc = 0;  // tiles t .. t + nb - 1 over inputs [k0, k0 + kc)
  int nb = 0;
  uint16_t* dst = nullptr;  // tile b's (hi) panel at dst + b * kc * 16; lo 2 * kc * 16 further
  int64_t piece = 0, per_tile = 0, done = 0, total = 0;

  void Start(const Weight& wt, bool sp, int64_t t0, int n, int64_t from, int64_t len,
             uint16_t* out) {
    w = &wt;
    split = sp;
    t = t0;
    nb = n;
    k0 = from;
    kc = len;
    dst = out;
    piece = std::min(PanelKAlign(wt.type), len);
    per_tile = (len + piece - 1) / piece;
    done = 0;
    total = n * per_tile;
  }
  bool Is(int64_t t0, int n, int64_t from, int64_t len) const {
    return t == t0 && nb == n && k0 == from && kc == len;
  }
  // Converts pieces [done, upto).
  __attribute__((noinline)) void Run(int64_t upto) {
    for (upto = std::min(upto, total); done < upto; ++done) {
      const int64_t b = done / per_tile, off = done % per_tile * piece;
      uint16_t* hi = dst + b * kc * 16 + off * 16;
      if (split) {
        DequantPanelBf16Split(*w, t + b, k0 + off, std::min(piece, kc - off), hi, hi + 2 * kc * 16);
      } else {
        DequantPanelBf16(*w, t + b, k0 + off, std::min(piece, kc - off), hi);
      }
    }
  }
};

// C(a, b) = [cin(a, b) or 0] + A rows [16a, 16a + 16) · panel b over nsteps steps of 32 input
// features, stored to cout(a, b); C(a, b) is cin / cout[2a + b]. a: the A tile of the block's
// first 16 rows at the chunk's first step (those of the next 16 rows lie a1_off bytes
// further); b: panel 0 (panel 1 at b + panel_bytes).
// kSplit (F32 / F16 weights): A and the panels are hi parts, their lo parts lie alo / blo
// bytes further, and C gets A_hi · B_hi + A_hi · B_lo + A_lo · B_hi (the lo · lo term, ~2^-16
// relative, is left out).
//
// pf: up to two byte ranges of pf_lines cache lines each (null: none) to prefetch into L2, a
// share per step, for the panels converted after this block (see AmxRunTiles). job (null:
// none): pieces of the next pair's panels to convert, spread over the steps, up to job_upto.
template <int kMa, int kNb, bool kSplit>
void Block(const uint8_t* a, size_t a1_off, const uint8_t* b, size_t panel_bytes, int64_t nsteps,
           size_t alo, size_t blo, const CTile* cin, const CTile* cout, const uint8_t* const* pf,
           int64_t pf_lines, PanelJob* job, int64_t job_upto) {
  const int64_t job_from = job != nullptr ? job->done : 0;
  TACHYON_LOAD_OR_ZERO(0, cin);
  if constexpr (kNb == 2) TACHYON_LOAD_OR_ZERO(1, cin);
  if constexpr (kMa == 2) TACHYON_LOAD_OR_ZERO(2, cin);
  if constexpr (kMa == 2 && kNb == 2) TACHYON_LOAD_OR_ZERO(3, cin);
  const uint8_t* a1 = a + a1_off;
  const uint8_t* b1 = b + panel_bytes;
  for (int64_t s = 0; s < nsteps; ++s) {
    if (pf_lines > 0) {
      for (int64_t l = pf_lines * s / nsteps; l < pf_lines * (s + 1) / nsteps; ++l) {
        _mm_prefetch(reinterpret_cast<const char*>(pf[0] + 64 * l), _MM_HINT_T1);
        if (pf[1] != nullptr)
          _mm_prefetch(reinterpret_cast<const char*>(pf[1] + 64 * l), _MM_HINT_T1);
      }
    }
    TACHYON_STEP(a, a1, b, b1);
    if constexpr (kSplit) {
      // A_hi is still in tiles 4 / 5: only the lo panels load for A_hi · B_lo, then A_lo
      // and B_hi again (10 tile loads per step instead of 12).
      _tile_loadd(6, b + blo + 1024 * s, 64);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (kNb == 2) {
        _tile_loadd(7, b1 + blo + 1024 * s, 64);
        _tile_dpbf16ps(1, 4, 7);
      }
      if constexpr (kMa == 2) {
        _tile_dpbf16ps(2, 5, 6);
        if constexpr (kNb == 2) _tile_dpbf16ps(3, 5, 7);
      }
      TACHYON_STEP(a + alo, a1 + alo, b, b1);
    }
    if (job != nullptr) {
      const int64_t want = job_from + (job_upto - job_from) * (s + 1) / nsteps;
      if (want > job->done) job->Run(want);
    }
  }
  _tile_stored(0, cout[0].p, cout[0].ld);
  if constexpr (kNb == 2) _tile_stored(1, cout[1].p, cout[1].ld);
  if constexpr (kMa == 2) _tile_stored(2, cout[2].p, cout[2].ld);
  if constexpr (kMa == 2 && kNb == 2) _tile_stored(3, cout[3].p, cout[3].ld);
}

using BlockFn = void (*)(const uint8_t*, size_t, const uint8_t*, size_t, int64_t, size_t, size_t,
                         const CTile*, const CTile*, const uint8_t* const*, int64_t, PanelJob*,
                         int64_t);
constexpr BlockFn kBlocks[2][2][2] = {
    {{Block<1, 1, false>, Block<1, 2, false>}, {Block<2, 1, false>, Block<2, 2, false>}},
    {{Block<1, 1, true>, Block<1, 2, true>}, {Block<2, 1, true>, Block<2, 2, true>}}};

#undef TACHYON_STEP
#undef TACHYON_LOAD_OR_ZERO

}  // namespace

size_t AmxActStride(int64_t cols) {
  // Bytes per activation row: cols padded to whole 32-input steps (the tile-major buffer of mp
  // rows takes mp times this).
  return static_cast<size_t>((cols + 31) / 32 * 32) * 2;
}

namespace {

// Where row i's 32 inputs of step s lie in the tile-major buffer.
inline uint8_t* ActAt(uint8_t* act, int64_t steps, int64_t i, int64_t s) {
  return act + (static_cast<size_t>(i / 16 * steps + s) << 10) + static_cast<size_t>(i % 16) * 64;
}

// Rows [i0, i1) of the tile-major buffer: each row's inputs, 32 per step, as `part` makes them
// (rows >= m and inputs >= cols: +0). One row block at a time, so the stores fill each A tile
// in order.
template <typename Part>
void ConvertRowsTiled(const float* x, int64_t cols, int64_t m, int64_t i0, int64_t i1, uint8_t* act,
                      int64_t x_row0, Part part) {
  const int64_t steps = (cols + 31) / 32;
  for (int64_t q0 = i0; q0 < i1; q0 = (q0 / 16 + 1) * 16) {
    const int64_t q1 = std::min(i1, (q0 / 16 + 1) * 16);
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t k = 32 * s;
      const auto m0 = static_cast<__mmask16>((1u << std::clamp<int64_t>(cols - k, 0, 16)) - 1);
      const auto m1 = static_cast<__mmask16>((1u << std::clamp<int64_t>(cols - k - 16, 0, 16)) - 1);
      for (int64_t i = q0; i < q1; ++i) {
        uint8_t* o = ActAt(act, steps, i, s);
        if (i >= m) {
          std::memset(o, 0, 64);
          continue;
        }
        const float* xi = x + (i - x_row0) * cols + k;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), part(_mm512_maskz_loadu_ps(m0, xi)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32),
                            part(_mm512_maskz_loadu_ps(m1, xi + 16)));
      }
    }
  }
}

}  // namespace

void AmxConvertRows(const float* x, int64_t cols, int64_t m, int64_t i0, int64_t i1, uint8_t* act,
                    int64_t x_row0) {
  // Round to nearest even (as F32ToBf16); inputs past cols are +0.
  ConvertRowsTiled(x, cols, m, i0, i1, act, x_row0,
                   [](__m512 v) { return (__m256i)_mm512_cvtneps_pbh(v); });
}

bool AmxSplitType(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16;
}

void AmxConvertRowsLow(const float* x, int64_t cols, int64_t m, int64_t i0, int64_t i1,
                       uint8_t* act_lo, int64_t x_row0) {
  ConvertRowsTiled(x, cols, m, i0, i1, act_lo, x_row0, [](__m512 v) {
    // hi exactly as AmxConvertRows rounds it, back to float; v - hi is exact in f32.
    // (vcvtne2ps2bf16 with a zero upper half: the same rounding as vcvtneps2bf16.)
    const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(_mm512_setzero_ps(), v);
    const __m512 hf = _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
    // +0 where hi is Inf / NaN (fpclass 0x99), so an Inf activation does not become NaN.
    const __mmask16 fin = static_cast<__mmask16>(~_mm512_fpclass_ps_mask(hf, 0x99));
    return (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_sub_ps(fin, v, hf));
  });
}

void AmxRunTiles(const Weight& w, const uint8_t* act, int64_t m, float* y, int64_t t0, int64_t t1) {
  if (t0 >= t1) return;
  const bool split = AmxSplitType(w.type);
  const int64_t mp = (m + 15) / 16 * 16;
  const int64_t kp = (w.cols + 31) / 32 * 32;
  const int64_t steps = kp / 32;
  // Activation bytes per row and feature in L2 (hi + lo rows for split types).
  const size_t abytes = split ? 4 : 2;
  const int64_t kchunk = split ? kAmxSplitKChunk : kAmxKChunk;
  const size_t act_chunk = split ? kAmxSplitActChunkBytes : kAmxActChunkBytes;
  // Few rows (batched decode): the whole row at once, so C goes to y once; the panels are
  // then read right after they are written (one or two row blocks).
  const int64_t kc = static_cast<size_t>(mp) * static_cast<size_t>(kp) * abytes <= act_chunk / 2
                         ? kp
                         : std::min(kp, kchunk);
  const int64_t mc = std::min(
      mp, std::max<int64_t>(
              32, static_cast<int64_t>(act_chunk / (static_cast<size_t>(kc) * abytes)) / 32 * 32));
  // Weight tiles per accumulation group (K chunks only): an even number, >= 2.
  const int64_t ng =
      kc < kp ? std::max<int64_t>(
                    2, static_cast<int64_t>(kAmxAccBytes / (static_cast<size_t>(mc) * 64)) / 2 * 2)
              : t1 - t0;
  float* acc =
      kc < kp ? ThreadScratch<float, AmxAccScratch>(static_cast<size_t>(ng * mc) * 16) : nullptr;
  const size_t ldy = static_cast<size_t>(w.rows) * sizeof(float);
  // Two sets of two panels (hi, then for split types two lo panels after them): the current
  // pair's, and the next pair's being converted between the current pair's tile steps.
  const size_t set = static_cast<size_t>(kc) * 32 * (split ? 2 : 1);
  uint16_t* const set0 = ThreadScratch<uint16_t, AmxSetScratch>(2 * set);
  uint16_t* const panel_sets[2] = {set0, set0 + set};
  PanelJob next;
  // The lo activation rows follow the mp hi rows (MatMulMultiAmx, AmxConvertRowsLow).
  const size_t alo = split ? static_cast<size_t>(mp) * AmxActStride(w.cols) : 0;
  alignas(64) float edge[4][256];
  const bool prefetch_f16 = split && w.type == GgmlType::kF16 && w.packed != nullptr;
  const size_t tile_bytes = prefetch_f16 ? PackedTileBytes(w.type, w.cols) : 0;
  LoadTileConfig(Config());
  for (int64_t i0 = 0; i0 < mp; i0 += mc) {
    const int64_t i1 = std::min(mp, i0 + mc);
    for (int64_t g0 = t0; g0 < t1; g0 += ng) {
      const int64_t g1 = std::min(t1, g0 + ng);
      for (int64_t k0 = 0; k0 < kp; k0 += kc) {
        const int64_t kcur = std::min(kc, kp - k0);
        const int64_t nsteps = kcur / 32;
        const size_t panel_bytes = static_cast<size_t>(kcur) * 32;
        const bool first = k0 == 0, last = k0 + kcur >= kp;
        for (int64_t t = g0; t < g1; t += 2) {
          const int nb = static_cast<int>(std::min<int64_t>(2, g1 - t));
          // This pair's panels: converted during the previous pair's blocks (the rest now),
          // or here at the start of a row chunk or group. Lo panels (split types) lie
          // 2 * panel_bytes after their hi panels.
          uint16_t* panel;
          if (next.Is(t, nb, k0, kcur)) {
            next.Run(next.total);
            panel = next.dst;
          } else {
            panel = panel_sets[0];
            next.Start(w, split, t, nb, k0, kcur, panel);
            next.Run(next.total);
          }
          const auto* pb = reinterpret_cast<const uint8_t*>(panel);
          // The next pair (the next of this chunk, else the group's first at the next chunk)
          // goes into the other set.
          const int64_t tn = t + 2 < g1 ? t + 2 : g0, kn = t + 2 < g1 ? k0 : k0 + kcur;
          const int nbn = static_cast<int>(std::min<int64_t>(2, g1 - tn));
          if (kn < kp) {
            next.Start(w, split, tn, nbn, kn, std::min(kc, kp - kn),
                       panel == panel_sets[0] ? panel_sets[1] : panel_sets[0]);
          } else {
            next.t = -1;
          }
          // Packed F16: the next pair's panel source (the next pair of this chunk, else the
          // group's first pair at the next chunk; 32 bytes per input and tile, contiguous in
          // each packed tile) goes to L2 in shares while this pair's blocks run, so the split
          // conversion does not wait for DRAM (it sat on its vcvtph2ps loads).
          const uint8_t* pf[2] = {nullptr, nullptr};
          int64_t pf_lines = 0;
          if (prefetch_f16 && kn < kp) {
            for (int b = 0; b < nbn; ++b)
              pf[b] = w.packed + static_cast<size_t>(tn + b) * tile_bytes +
                      static_cast<size_t>(kn) * 32;
            pf_lines = std::min(kc, kp - kn) / 2;
          }
          // Split types (F16, F32): the next pair's conversion runs between the tile steps of
          // the blocks from job_blk on (the second half where its source is being prefetched
          // over the whole pair, packed F16; else all): 1.03-1.07x at the F16 FFN shapes in
          // alternating same-process runs. The other types convert at the pair's start (their
          // pieces, up to 8 KiB of panel for the K-quants, stalled the tile steps: 0.85-0.97x).
          const int64_t nblk = (i1 - i0 + 31) / 32;
          const int64_t job_blk = pf_lines > 0 ? nblk / 2 : 0;
          for (int64_t i = i0; i < i1; i += 32) {
            // This block's share of the prefetch lines (the same for both tiles).
            const int64_t blk = (i - i0) / 32;
            const int64_t l0 = pf_lines * blk / nblk, l1 = pf_lines * (blk + 1) / nblk;
            const bool run_job = split && next.t >= 0 && blk >= job_blk;
            const int64_t job_upto =
                run_job ? next.total * (blk + 1 - job_blk) / (nblk - job_blk) : 0;
            const uint8_t* pfq[2] = {pf[0] ? pf[0] + 64 * l0 : nullptr,
                                     pf[1] ? pf[1] + 64 * l0 : nullptr};
            const int ma = static_cast<int>(std::min<int64_t>(2, (i1 - i) / 16));
            CTile cin[4], cout[4];
            int edges[4];
            int nedge = 0;
            for (int a = 0; a < ma; ++a) {
              for (int b = 0; b < nb; ++b) {
                const int idx = 2 * a + b;
                const int64_t r = i + 16 * a, j = 16 * (t + b);
                if (acc != nullptr) {
                  float* p = acc + ((t + b - g0) * mc + (r - i0)) * 16;
                  // Two stores each (a CTile copy would reload 16 bytes from two 8-byte stores:
                  // a store-forwarding stall per C tile, ~5% of the Q4_0 GEMM in perf).
                  cin[idx].p = cout[idx].p = p;
                  cin[idx].ld = cout[idx].ld = 64;
                }
                if (!last) continue;
                const int64_t nr = std::min<int64_t>(16, m - r);
                const int64_t nc = std::min<int64_t>(16, w.rows - j);
                if (nr == 16 && nc == 16) {
                  cout[idx] = {y + r * w.rows + j, ldy};
                } else {
                  // Overhanging tile: through a 16 x 16 scratch, copying only the valid part.
                  cout[idx] = {edge[idx], 64};
                  edges[nedge++] = idx;
                }
              }
            }
            // Block<kMa, kNb> indexes C(a, b) as 2a + b; with one weight tile, C(1, 0) is [2].
            const uint8_t* pa = act + (static_cast<size_t>(i / 16 * steps + k0 / 32) << 10);
            kBlocks[split][ma - 1][nb - 1](pa, static_cast<size_t>(steps) << 10, pb, panel_bytes,
                                           nsteps, alo, 2 * panel_bytes, first ? nullptr : cin,
                                           cout, pfq, pfq[0] ? l1 - l0 : 0,
                                           run_job ? &next : nullptr, job_upto);
            for (int q = 0; q < nedge; ++q) {
              const int idx = edges[q];
              const int64_t r = i + 16 * (idx / 2), j = 16 * (t + idx % 2);
              const int64_t nr = std::min<int64_t>(16, m - r);
              const int64_t nc = std::min<int64_t>(16, w.rows - j);
              for (int64_t rr = 0; rr < nr; ++rr)
                std::memcpy(y + (r + rr) * w.rows + j, edge[idx] + 16 * rr,
                            static_cast<size_t>(nc) * 4);
            }
          }
        }
      }
    }
  }
  // Hand the tile state back, so a context switch does not save 8 KiB of tiles.
  ReleaseTiles();
}

}  // namespace tachyon::kernels::internal
