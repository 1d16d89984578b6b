#include "server/routes.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace tachyon::server {
namespace {

TEST(RoutesTest, EveryTableEntryMatchesItself) {
  for (const Route& r : kRoutes) {
    std::string path(r.path);
    size_t brace = path.find('{');
    if (brace != std::string::npos) path = path.substr(0, brace) + "x";
    RouteMatch m = MatchRoute(r.method, path);
    ASSERT_NE(m.route, nullptr) << r.method << " " << r.path;
    EXPECT_EQ(m.route->id, r.id) << r.path;
    EXPECT_TRUE(m.path_known);
  }
}

TEST(RoutesTest, NoDuplicateMethodAndPath) {
  std::set<std::string> seen;
  for (const Route& r : kRoutes) {
    EXPECT_TRUE(seen.insert(std::string(r.method) + " " + std::string(r.path)).second) << r.path;
  }
}

TEST(RoutesTest, ParamTakesTheRestOfThePath) {
  RouteMatch m = MatchRoute("GET", "/v1/models/org/name");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->id, RouteId::kModel);
  EXPECT_EQ(m.param, "org/name");
  // An empty id is no model route, and /v1/models itself is the list.
  EXPECT_EQ(MatchRoute("GET", "/v1/models/").route, nullptr);
  EXPECT_EQ(MatchRoute("GET", "/v1/models").route->id, RouteId::kModels);
}

TEST(RoutesTest, WrongMethodIsKnownPathWithoutRoute) {
  RouteMatch m = MatchRoute("GET", "/v1/completions");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_TRUE(m.path_known);
  EXPECT_EQ(m.allow, "POST");
  m = MatchRoute("DELETE", "/v1/models/x");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_TRUE(m.path_known);
  EXPECT_EQ(m.allow, "GET");
}

TEST(RoutesTest, UnknownPathsAreUnknown) {
  for (const char* p :
       {"/v1", "/v1/completion", "/v1/completions/", "/healthz", "/metrics/x", "/V1/models", ""}) {
    RouteMatch m = MatchRoute("GET", p);
    EXPECT_EQ(m.route, nullptr) << p;
    EXPECT_FALSE(m.path_known) << p;
  }
}

}  // namespace
}  // namespace tachyon::server
