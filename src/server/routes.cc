#include "server/routes.h"

namespace tachyon::server {

namespace {

// True when `path` matches `pattern`; a trailing "{param}" segment captures into `param`.
bool PathMatches(std::string_view pattern, std::string_view path, std::string_view& param) {
  size_t brace = pattern.find('{');
  if (brace == std::string_view::npos) return pattern == path;
  std::string_view prefix = pattern.substr(0, brace);
  if (path.size() <= prefix.size() || path.substr(0, prefix.size()) != prefix) return false;
  param = path.substr(prefix.size());
  return true;
}

}  // namespace

RouteMatch MatchRoute(std::string_view method, std::string_view path) {
  RouteMatch m;
  for (const Route& r : kRoutes) {
    std::string_view param;
    if (!PathMatches(r.path, path, param)) continue;
    m.path_known = true;
    if (m.allow.find(r.method) == std::string::npos) {
      if (!m.allow.empty()) m.allow += ", ";
      m.allow += r.method;
    }
    if (r.method == method) {
      m.route = &r;
      m.param = param;
      return m;
    }
  }
  return m;
}

}  // namespace tachyon::server
