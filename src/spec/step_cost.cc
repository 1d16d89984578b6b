#include "spec/step_cost.h"

#include <algorithm>
#include <cmath>

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
  return FromNeighbours(rows);
}

std::optional<StepCostModel::Estimate> StepCostModel::FromNeighbours(int64_t rows) const {
  if (rows < 1) return std::nullopt;
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

std::optional<double> StepCostModel::Believed(int64_t rows, double fallback) const {
  if (rows < 1) return std::nullopt;
  const std::optional<Estimate> others = FromNeighbours(rows);
  if (rows <= kMaxRows && Fresh(counts_[static_cast<size_t>(rows)])) {
    const Estimate own = Own(counts_[static_cast<size_t>(rows)]);
    if (own.settled) return own.seconds;
    return others ? std::min(own.seconds, others->seconds) : fallback;
  }
  return others ? std::optional<double>(others->seconds) : std::nullopt;
}

double ExpectedEmitted(double alpha, int k) {
  double e = 1, term = 1;
  for (int j = 0; j < k; ++j) {
    term *= alpha;
    e += term;
  }
  return e;
}

std::vector<int> PlanDraftLengths(const StepCostModel& cost, const StepPlanInput& in,
                                  const std::vector<DraftCandidate>& candidates) {
  std::vector<int> best_k(candidates.size(), 0);
  const std::optional<double> base = cost.Seconds(in.batch_rows);
  if (!base || *base <= 0) return best_k;
  // Every draft, most likely first (ties: the candidate's order, then the position).
  struct Draft {
    double p;
    size_t c;
    int j;
  };
  std::vector<Draft> order;
  for (size_t c = 0; c < candidates.size(); ++c) {
    for (size_t j = 0; j < candidates[c].accept.size(); ++j) {
      if (!(candidates[c].accept[j] > 0)) break;
      order.push_back({candidates[c].accept[j], c, static_cast<int>(j)});
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Draft& a, const Draft& b) { return a.p > b.p; });
  if (order.empty()) return best_k;
  if (!cost.Believed(in.batch_rows + 1, *base)) {  // one draft measures what a row adds
    best_k[order[0].c] = 1;
    return best_k;
  }
  const double rows0 = static_cast<double>(in.batch_rows);
  const double floor_rate = (1 - in.tolerance) / *base;  // what no member may fall below
  // What one row of the step costs the others: an accepted draft saves its sequence a later
  // step, in which a member without drafts then computes alongside one row fewer.
  const std::optional<double> below =
      in.batch_rows > 1 ? cost.Seconds(in.batch_rows - 1) : std::nullopt;
  const double row_seconds = below ? std::max(*base - *below, 0.0) : 0.0;
  double best = in.margin * rows0 / *base;                 // what a plan must beat
  std::vector<int> k(candidates.size(), 0);
  std::vector<double> emitted(candidates.size(), 1.0);
  int longest = 0;
  double extra = 0;  // expected tokens the drafts add
  for (size_t d = 0; d < order.size(); ++d) {
    const Draft& x = order[d];
    if (x.j != k[x.c]) continue;  // (non-increasing accept: never happens)
    k[x.c] = x.j + 1;
    emitted[x.c] += x.p;
    extra += x.p;
    longest = std::max(longest, k[x.c]);
    const std::optional<double> t_rows =
        cost.Believed(in.batch_rows + static_cast<int64_t>(d) + 1, *base);
    if (!t_rows) break;  // no basis this far up (and none further)
    const double t = *t_rows + static_cast<double>(std::max(longest - in.free_draft_forwards, 0)) *
                                   std::max(in.draft_seconds, 0.0);
    if (t <= 0) continue;
    // A member without drafts (idle, or a candidate left at 0) waits t for its token, less
    // the rows the accepted drafts will spare it later.
    const double t_idle = std::max(t - extra * row_seconds, 1e-12);
    bool feasible = true;
    for (size_t c = 0; c < candidates.size() && feasible; ++c) {
      feasible = k[c] > 0 ? emitted[c] / t >= floor_rate : 1 / t_idle >= floor_rate;
    }
    if (in.num_idle > 0 && 1 / t_idle < floor_rate) feasible = false;
    const double rate = (rows0 + extra) / t;
    if (feasible && rate > best) {
      best = rate;
      best_k = k;
    }
  }
  return best_k;
}

int ProbePause(const StepCostModel& cost, int64_t batch_rows, double alpha, double budget) {
  const std::optional<StepCostModel::Estimate> base = cost.Predict(batch_rows);
  const std::optional<StepCostModel::Estimate> more = cost.Predict(batch_rows + 1);
  if (batch_rows < 1 || !base || !more || !base->settled || !more->settled ||
      !(base->seconds > 0) || !(budget > 0)) {
    return 0;
  }
  const double rows = static_cast<double>(batch_rows);
  const double loss =
      more->seconds / base->seconds * rows / (rows + std::clamp(alpha, 0.0, 1.0)) - 1;
  if (!(loss > 0)) return 0;
  return static_cast<int>(std::min(std::ceil(loss / budget - 1e-9), 1e6));  // (rounding)
}

int CostAwareDraftLength(const StepCostModel& cost, int64_t batch_rows, double alpha, int max_k,
                         double margin, double draft_seconds, int free_drafts) {
  if (max_k <= 0) return 0;
  if (!(alpha > 0)) return 0;  // nothing is expected to be accepted
  if (!cost.Seconds(batch_rows)) return max_k;
  DraftCandidate c;
  double p = 1;
  for (int j = 0; j < max_k; ++j) c.accept.push_back(p *= std::min(alpha, 1.0));
  StepPlanInput in;
  in.batch_rows = batch_rows;
  in.margin = margin;
  in.draft_seconds = draft_seconds;
  in.free_draft_forwards = free_drafts;
  return PlanDraftLengths(cost, in, {c})[0];
}

}  // namespace tachyon::spec
