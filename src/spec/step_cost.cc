#include "spec/step_cost.h"

#include <algorithm>

namespace tachyon::spec {

void StepCostModel::Observe(int64_t rows, double seconds) {
  if (rows < 1 || rows > kMaxRows || !(seconds >= 0)) return;
  Count& c = counts_[static_cast<size_t>(rows)];
  c.seconds[static_cast<size_t>(c.next)] = seconds;
  c.at[static_cast<size_t>(c.next)] = now_;
  c.next = (c.next + 1) % kWindow;
  c.n = std::min(c.n + 1, kWindow);
  c.last_at = now_;
  ++now_;
}

StepCostModel::Estimate StepCostModel::Own(const Count& c) const {
  std::array<double, kWindow> fresh{};
  int n = 0;
  for (int i = 0; i < c.n; ++i) {
    if (now_ - c.at[static_cast<size_t>(i)] < kForgetAfter) {
      fresh[static_cast<size_t>(n++)] = c.seconds[static_cast<size_t>(i)];
    }
  }
  for (int i = 1; i < n; ++i) {  // insertion sort of at most kWindow values
    for (int j = i; j > 0 && fresh[static_cast<size_t>(j - 1)] > fresh[static_cast<size_t>(j)];
         --j) {
      std::swap(fresh[static_cast<size_t>(j - 1)], fresh[static_cast<size_t>(j)]);
    }
  }
  return {fresh[static_cast<size_t>((n - 1) / 2)], n >= kSettled};
}

std::optional<double> StepCostModel::Measured(int64_t rows) const {
  if (rows < 1 || rows > kMaxRows || !Fresh(counts_[static_cast<size_t>(rows)])) return std::nullopt;
  return Own(counts_[static_cast<size_t>(rows)]).seconds;
}

std::optional<StepCostModel::Estimate> StepCostModel::Predict(int64_t rows) const {
  if (rows < 1) return std::nullopt;
  if (rows <= kMaxRows && Fresh(counts_[static_cast<size_t>(rows)])) {
    return Own(counts_[static_cast<size_t>(rows)]);
  }
  int64_t lo = -1, lo2 = -1, hi = -1;
  for (int64_t n = std::min<int64_t>(rows - 1, kMaxRows); n >= 1; --n) {
    if (!Fresh(counts_[static_cast<size_t>(n)])) continue;
    if (lo < 0) {
      lo = n;
    } else {
      lo2 = n;
      break;
    }
  }
  for (int64_t n = rows + 1; n <= kMaxRows; ++n) {
    if (Fresh(counts_[static_cast<size_t>(n)])) {
      hi = n;
      break;
    }
  }
  if (lo < 0) return std::nullopt;
  const Estimate e_lo = Own(counts_[static_cast<size_t>(lo)]);
  if (hi >= 0) {
    const Estimate e_hi = Own(counts_[static_cast<size_t>(hi)]);
    const double f = static_cast<double>(rows - lo) / static_cast<double>(hi - lo);
    return Estimate{e_lo.seconds + (e_hi.seconds - e_lo.seconds) * f, e_hi.settled, true};
  }
  if (lo2 < 0) return std::nullopt;
  const Estimate e_lo2 = Own(counts_[static_cast<size_t>(lo2)]);
  const double slope =
      std::max(0.0, (e_lo.seconds - e_lo2.seconds) / static_cast<double>(lo - lo2));
  return Estimate{e_lo.seconds + slope * static_cast<double>(rows - lo), false};
}

double ExpectedEmitted(double alpha, int k) {
  double e = 1, term = 1;
  for (int j = 0; j < k; ++j) {
    term *= alpha;
    e += term;
  }
  return e;
}

int CostAwareDraftLength(const StepCostModel& cost, int64_t batch_rows, double alpha, int max_k,
                         double margin, double draft_seconds, int free_drafts) {
  if (max_k <= 0) return 0;
  if (!(alpha > 0)) return 0;  // nothing is expected to be accepted
  const std::optional<double> base = cost.Seconds(batch_rows);
  if (!base || *base <= 0) return max_k;
  const double b = static_cast<double>(batch_rows);
  const double none = b / *base;  // tokens per second without these drafts
  int best_k = 0;
  double best = none * margin;
  for (int k = 1; k <= max_k; ++k) {
    const std::optional<StepCostModel::Estimate> e = cost.Predict(batch_rows + k);
    const double t =
        (e && (e->settled || e->interpolated) ? e->seconds : *base) +
        static_cast<double>(std::max(k - free_drafts, 0)) * std::max(draft_seconds, 0.0);
    const double rate = (b - 1 + ExpectedEmitted(alpha, k)) / std::max(t, 1e-12);
    if (rate > best) {
      best = rate;
      best_k = k;
    }
  }
  return best_k;
}

}  // namespace tachyon::spec
