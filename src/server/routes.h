// The HTTP routes `tachyon serve` answers: one table, the only place a route is declared.
// OpenAiApi::Handle dispatches through MatchRoute(), and docs/openapi.yaml is checked against
// this table (tests/python/test_openapi_routes.py reads the kRoutes lines below, one route per
// line, so keep that form: {"METHOD", "/path", RouteId::kName}).
#pragma once

#include <string>
#include <string_view>

namespace tachyon::server {

enum class RouteId {
  kCompletions,
  kChatCompletions,
  kModels,
  kModel,  // one model by id
  kEmbeddings,
  kRerank,
  kScore,
  kTokenize,
  kDetokenize,
  kHealth,
  kReady,
  kMetrics,
  kResponses,
  kMessages,
  kCountTokens,
  kChatPage,
  kKvEvents,
  kReplicaInfo,
};

struct Route {
  std::string_view method;  // "GET" or "POST"
  // Literal path, or a prefix ending in one "{param}" segment that matches the rest of the path
  // (one or more characters, '/' included: model ids such as "org/name" have one).
  std::string_view path;
  RouteId id;
};

inline constexpr Route kRoutes[] = {
    {"POST", "/v1/completions", RouteId::kCompletions},
    {"POST", "/v1/chat/completions", RouteId::kChatCompletions},
    {"GET", "/v1/models", RouteId::kModels},
    {"GET", "/v1/models/{model}", RouteId::kModel},
    {"POST", "/v1/embeddings", RouteId::kEmbeddings},
    {"POST", "/v1/rerank", RouteId::kRerank},
    {"POST", "/v1/score", RouteId::kScore},
    {"POST", "/tokenize", RouteId::kTokenize},
    {"POST", "/detokenize", RouteId::kDetokenize},
    {"GET", "/health", RouteId::kHealth},
    {"GET", "/health/ready", RouteId::kReady},
    {"GET", "/ready", RouteId::kReady},
    {"GET", "/metrics", RouteId::kMetrics},
    {"POST", "/v1/responses", RouteId::kResponses},
    {"POST", "/v1/messages", RouteId::kMessages},
    {"POST", "/v1/messages/count_tokens", RouteId::kCountTokens},
    {"GET", "/", RouteId::kChatPage},
    {"GET", "/v1/kv_events", RouteId::kKvEvents},
    {"GET", "/v1/replica_info", RouteId::kReplicaInfo},
};

struct RouteMatch {
  const Route* route = nullptr;  // the route for (method, path); null when none
  bool path_known = false;       // some route has this path (with another method: 405)
  std::string allow;             // path_known: its methods, comma-separated (the Allow header)
  std::string_view param;        // the "{param}" part of the path, if the route has one
};

// Finds the route for a request. `path` is without the query string.
RouteMatch MatchRoute(std::string_view method, std::string_view path);

}  // namespace tachyon::server
