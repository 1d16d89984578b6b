// EtcdClient: the calls of etcd's v3 JSON API (its gRPC gateway: POST /v3/..., int64 fields as
// strings, keys and values base64) that replica registration and discovery need, over the
// router's own HTTP client (router/upstream_client.h). Keys and values here are plain bytes.
//
// Every answer is parsed with the server's JSON limits (server/json_limits.h) and checked
// field by field: garbage from the other end is an error Status, never a crash. The Parse*
// functions are that parsing, pure, for tests.
//
// Thread-safety: the blocking calls may be made from any thread except the client's own io
// thread (i.e. not from a Watch handler); each waits at most about 2x `timeout`.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "router/upstream_client.h"
#include "util/status.h"

namespace tachyon::router {

struct EtcdKeyValue {
  std::string key, value;
  int64_t lease = 0;  // 0: none
};

struct EtcdRange {
  std::vector<EtcdKeyValue> kvs;
  int64_t revision = 0;  // the store's revision the answer reflects
};

class EtcdClient {
 public:
  // `url`: etcd's client URL, http://HOST:PORT. Errors: InvalidArgument naming what is wrong.
  static Result<std::unique_ptr<EtcdClient>> Create(std::string_view url,
                                                    std::chrono::milliseconds timeout);
  ~EtcdClient();

  const std::string& url() const { return endpoint_.url; }

  // A lease of `ttl_s` seconds (etcd may grant a longer one). Returns its ID.
  Result<int64_t> GrantLease(int64_t ttl_s);
  // Refreshes `lease`. Returns its TTL; 0 when etcd no longer knows it (expired or revoked).
  Result<int64_t> KeepAlive(int64_t lease);
  Status RevokeLease(int64_t lease);
  // Errors: NotFound when `lease` is unknown to etcd; Unavailable when etcd cannot be reached
  // or refuses.
  Status Put(std::string_view key, std::string_view value, int64_t lease);
  Status Delete(std::string_view key);
  // Every key starting with `prefix`.
  Result<EtcdRange> RangePrefix(std::string_view prefix);

  // Watches the keys under `prefix` from `start_revision`: `on_event` runs (on the client's
  // io thread) for each message of the stream; `on_end` once when it ends, with why. Cancel the
  // returned call to end it.
  std::shared_ptr<UpstreamCall> Watch(std::string_view prefix, int64_t start_revision,
                                      std::function<void()> on_event,
                                      std::function<void(const std::string&)> on_end);

 private:
  EtcdClient(Endpoint endpoint, std::chrono::milliseconds timeout);
  // POSTs `body` to `path`; the answer's body when it is a 200.
  Result<std::string> Call(const std::string& path, std::string body);

  const Endpoint endpoint_;
  const std::chrono::milliseconds timeout_;
  UpstreamClient client_;
};

// Answers of etcd's JSON API (see EtcdClient). Errors: Unavailable naming what is wrong.
Result<int64_t> ParseLeaseGrant(std::string_view body);
Result<int64_t> ParseKeepAlive(std::string_view body);
Result<EtcdRange> ParseRange(std::string_view body);
// One message (one line) of a watch stream: OK for a created / events / progress message.
Status ParseWatchMessage(std::string_view line);
// An error answer's message ({"error": ..., "message": ..., "code": N}), or the body itself.
std::string EtcdErrorMessage(std::string_view body);

// The range_end that makes [prefix, range_end) every key starting with `prefix`.
std::string PrefixRangeEnd(std::string_view prefix);

}  // namespace tachyon::router
