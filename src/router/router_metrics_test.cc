#include "router/router_metrics.h"

#include <gtest/gtest.h>

namespace tachyon::router {
namespace {

TEST(RouterMetrics, ForgoneHitsCountByWhatDecided) {
  RouterMetrics m;
  Placement by_score;
  by_score.forgone_cached_tokens = 48;
  Placement by_guard;
  by_guard.forgone_cached_tokens = 32;
  by_guard.forgone_by_guard = true;
  Placement kept;  // the holder chosen: nothing forgone
  m.ObservePlacement("http://a", by_score, 100);
  m.ObservePlacement("http://a", by_guard, 100);
  m.ObservePlacement("http://b", by_score, 100);
  m.ObservePlacement("http://b", kept, 100);
  EXPECT_EQ(m.forgone_cached("score"), 96);
  EXPECT_EQ(m.forgone_cached("balance_guard"), 32);
  const std::string text = m.Render({}, 0, 0, "kv");
  EXPECT_NE(text.find("tachyon_router_forgone_cached_tokens_total{reason=\"score\"} 96\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tachyon_router_forgone_cached_tokens_total{reason=\"balance_guard\"} 32\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace tachyon::router
