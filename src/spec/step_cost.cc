#include "spec/step_cost.h"

#include <algorithm>

namespace tachyon::spec {

void StepCostModel::Observe(int64_t rows, double seconds) {
  if (rows < 1 || rows > kMaxRows || !(seconds >= 0)) return;
  double& s = seconds_[static_cast<size_t>(rows)];
  s = s < 0 ? seconds : (1 - kWeight) * s + kWeight * seconds;
}

std::optional<double> StepCostModel::Seconds(int64_t rows) const {
  if (rows < 1) return std::nullopt;
  if (rows <= kMaxRows && seconds_[static_cast<size_t>(rows)] >= 0) {
    return seconds_[static_cast<size_t>(rows)];
  }
  int64_t lo = -1, lo2 = -1, hi = -1;
  for (int64_t n = std::min<int64_t>(rows - 1, kMaxRows); n >= 1; --n) {
    if (seconds_[static_cast<size_t>(n)] < 0) continue;
    if (lo < 0) {
      lo = n;
    } else {
      lo2 = n;
      break;
    }
  }
  for (int64_t n = rows + 1; n <= kMaxRows; ++n) {
    if (seconds_[static_cast<size_t>(n)] >= 0) {
      hi = n;
      break;
    }
  }
  if (lo < 0) return std::nullopt;
  const double t_lo = seconds_[static_cast<size_t>(lo)];
  if (hi >= 0) {
    const double t_hi = seconds_[static_cast<size_t>(hi)];
    return t_lo + (t_hi - t_lo) * static_cast<double>(rows - lo) / static_cast<double>(hi - lo);
  }
  if (lo2 < 0) return std::nullopt;
  const double slope =
      std::max(0.0, (t_lo - seconds_[static_cast<size_t>(lo2)]) / static_cast<double>(lo - lo2));
  return t_lo + slope * static_cast<double>(rows - lo);
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
                         double margin, double draft_seconds) {
  if (max_k <= 0) return 0;
  if (!(alpha > 0)) return 0;  // nothing is expected to be accepted
  const std::optional<double> base = cost.Seconds(batch_rows);
  if (!base || *base <= 0) return max_k;
  const double b = static_cast<double>(batch_rows);
  const double none = b / *base;  // tokens per second without these drafts
  int best_k = 0;
  double best = none * margin;
  for (int k = 1; k <= max_k; ++k) {
    const double t = cost.Seconds(batch_rows + k).value_or(*base) +
                     static_cast<double>(k) * std::max(draft_seconds, 0.0);
    const double rate = (b - 1 + ExpectedEmitted(alpha, k)) / std::max(t, 1e-12);
    if (rate > best) {
      best = rate;
      best_k = k;
    }
  }
  return best_k;
}

}  // namespace tachyon::spec
