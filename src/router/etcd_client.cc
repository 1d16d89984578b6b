#include "router/etcd_client.h"

#include <charconv>
#include <condition_variable>
#include <mutex>

#include <nlohmann/json.hpp>

#include "server/json_limits.h"
#include "util/base64.h"

namespace tachyon::router {
namespace {

using nlohmann::json;

constexpr size_t kMaxAnswerBytes = size_t{16} << 20;

Result<json> ParseObject(std::string_view body, const char* what) {
  server::JsonLimits limits;
  limits.max_bytes = kMaxAnswerBytes;
  std::optional<json> j = server::ParseBoundedJson(body, limits);
  if (!j || !j->is_object()) {
    return Unavailable(std::string("etcd's ") + what + " answer is not a JSON object");
  }
  return std::move(*j);
}

// An int64 field as the gateway writes it (a string of digits) or as a number; `fallback` when
// absent. nullopt when present but not an integer.
std::optional<int64_t> Int64Field(const json& obj, const char* key, int64_t fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return std::nullopt;
  const std::string& s = it->get_ref<const std::string&>();
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// The stream endpoints wrap their answer as {"result": {...}} or {"error": {...}}.
Result<json> StreamResult(std::string_view body, const char* what) {
  // The first non-empty line: one answer per line.
  while (!body.empty() && (body.front() == '\n' || body.front() == '\r')) body.remove_prefix(1);
  body = body.substr(0, body.find('\n'));
  ASSIGN_OR_RETURN(json j, ParseObject(body, what));
  if (j.contains("error")) return Unavailable(std::string("etcd: ") + EtcdErrorMessage(body));
  auto it = j.find("result");
  if (it == j.end() || !it->is_object()) {
    return Unavailable(std::string("etcd's ") + what + " answer has no 'result' object");
  }
  return *it;
}

}  // namespace

std::string PrefixRangeEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<uint8_t>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::string EtcdErrorMessage(std::string_view body) {
  std::optional<json> j = server::ParseBoundedJson(body);
  if (j && j->is_object()) {
    const json* e = j->contains("error") ? &(*j)["error"] : &*j;
    for (const char* key : {"message", "error"}) {
      if (e->is_object() && e->contains(key) && (*e)[key].is_string()) {
        return (*e)[key].get<std::string>();
      }
    }
    if (e->is_string()) return e->get<std::string>();
  }
  std::string text(body.substr(0, 200));
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return text.empty() ? "an empty answer" : "'" + text + "'";
}

Result<int64_t> ParseLeaseGrant(std::string_view body) {
  ASSIGN_OR_RETURN(json j, ParseObject(body, "lease grant"));
  if (j.contains("error") && j["error"].is_string() && !j["error"].get<std::string>().empty()) {
    return Unavailable("etcd: " + EtcdErrorMessage(body));
  }
  const std::optional<int64_t> id = Int64Field(j, "ID", 0);
  if (!id || *id == 0) return Unavailable("etcd's lease grant answer has no lease ID");
  return *id;
}

Result<int64_t> ParseKeepAlive(std::string_view body) {
  ASSIGN_OR_RETURN(json r, StreamResult(body, "lease keepalive"));
  const std::optional<int64_t> ttl = Int64Field(r, "TTL", 0);
  if (!ttl) return Unavailable("etcd's lease keepalive answer has a TTL that is not an integer");
  return *ttl < 0 ? 0 : *ttl;
}

Result<EtcdRange> ParseRange(std::string_view body) {
  ASSIGN_OR_RETURN(json j, ParseObject(body, "range"));
  EtcdRange out;
  if (j.contains("header") && j["header"].is_object()) {
    const std::optional<int64_t> rev = Int64Field(j["header"], "revision", 0);
    if (!rev) return Unavailable("etcd's range answer has a revision that is not an integer");
    out.revision = *rev;
  }
  auto kvs = j.find("kvs");
  if (kvs == j.end() || kvs->is_null()) return out;  // no key: the field is left out
  if (!kvs->is_array()) return Unavailable("etcd's range answer has a 'kvs' that is no array");
  for (const json& kv : *kvs) {
    if (!kv.is_object() || !kv.contains("key") || !kv["key"].is_string()) {
      return Unavailable("etcd's range answer has an entry without a 'key'");
    }
    EtcdKeyValue e;
    std::optional<std::string> key = util::Base64Decode(kv["key"].get<std::string>());
    std::optional<std::string> value = std::string();  // an empty value is left out
    if (kv.contains("value")) {
      value = kv["value"].is_string() ? util::Base64Decode(kv["value"].get<std::string>())
                                      : std::nullopt;
    }
    if (!key || !value) return Unavailable("etcd's range answer has a key or value not in base64");
    const std::optional<int64_t> lease = Int64Field(kv, "lease", 0);
    if (!lease) return Unavailable("etcd's range answer has a lease that is not an integer");
    e.key = std::move(*key);
    e.value = std::move(*value);
    e.lease = *lease;
    out.kvs.push_back(std::move(e));
  }
  return out;
}

Status ParseWatchMessage(std::string_view line) {
  Result<json> r = StreamResult(line, "watch");
  if (!r.ok()) return r.status();
  const json& result = r.value();
  auto flag = [&result](const char* key) {
    return result.contains(key) && result[key].is_boolean() && result[key].get<bool>();
  };
  if (flag("canceled")) {
    const std::string reason =
        result.contains("cancel_reason") && result["cancel_reason"].is_string()
            ? result["cancel_reason"].get<std::string>()
            : "no reason given";
    return Unavailable("etcd canceled the watch: " + reason);
  }
  if (result.contains("events") && !result["events"].is_array()) {
    return Unavailable("etcd's watch message has 'events' that is no array");
  }
  return OkStatus();
}

// --- EtcdClient ------------------------------------------------------------------------

Result<std::unique_ptr<EtcdClient>> EtcdClient::Create(std::string_view url,
                                                       std::chrono::milliseconds timeout) {
  Result<Endpoint> e = ParseReplicaUrl(url);
  if (!e.ok()) {
    return InvalidArgument("etcd URL: " + e.status().message());
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(e).value(), timeout));
}

EtcdClient::EtcdClient(Endpoint endpoint, std::chrono::milliseconds timeout)
    : endpoint_(std::move(endpoint)), timeout_(timeout), client_(1) {}

EtcdClient::~EtcdClient() {
  client_.Stop();
}

Result<std::string> EtcdClient::Call(const std::string& path, std::string body) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int status = 0;
    std::string body;
    bool too_large = false;
    UpstreamOutcome outcome = UpstreamOutcome::kCancelled;
    std::string message;
  };
  auto shared = std::make_shared<Shared>();
  UpstreamRequest req;
  req.method = "POST";
  req.target = path;
  req.body = std::move(body);
  req.headers.emplace_back("Content-Type", "application/json");
  UpstreamTimeouts t;
  t.connect = t.read = timeout_;
  UpstreamHandlers h;
  h.on_head = [shared](int status, const server::Headers&) { shared->status = status; };
  h.on_data = [shared](std::string_view data) {
    if (shared->body.size() + data.size() > kMaxAnswerBytes) {
      shared->too_large = true;
      return false;
    }
    shared->body.append(data);
    return true;
  };
  h.on_done = [shared](UpstreamOutcome o, const std::string& message) {
    std::lock_guard<std::mutex> lock(shared->mu);
    shared->outcome = o;
    shared->message = message;
    shared->done = true;
    shared->cv.notify_all();
  };
  std::shared_ptr<UpstreamCall> call = client_.Start(endpoint_, std::move(req), t, std::move(h));
  std::unique_lock<std::mutex> lock(shared->mu);
  if (!shared->cv.wait_for(lock, 2 * timeout_ + std::chrono::milliseconds(500),
                           [&] { return shared->done; })) {
    lock.unlock();
    call->Cancel();
    return Unavailable("etcd at " + endpoint_.url + ": " + path + " timed out");
  }
  const std::string where = "etcd at " + endpoint_.url + ": " + path + ": ";
  if (shared->too_large) return Unavailable(where + "an answer over 16 MiB");
  if (shared->outcome != UpstreamOutcome::kComplete) {
    return Unavailable(where + UpstreamOutcomeName(shared->outcome) +
                       (shared->message.empty() ? "" : " (" + shared->message + ")"));
  }
  if (shared->status != 200) {
    std::optional<json> j = server::ParseBoundedJson(shared->body);
    const bool not_found = shared->status == 404 ||
                           (j && j->is_object() && j->contains("code") &&
                            (*j)["code"].is_number_integer() && (*j)["code"].get<int64_t>() == 5);
    const std::string msg =
        where + "HTTP " + std::to_string(shared->status) + ": " + EtcdErrorMessage(shared->body);
    return not_found ? Status(NotFound(msg)) : Status(Unavailable(msg));
  }
  return std::move(shared->body);
}

Result<int64_t> EtcdClient::GrantLease(int64_t ttl_s) {
  ASSIGN_OR_RETURN(std::string body, Call("/v3/lease/grant", json{{"TTL", ttl_s}}.dump()));
  return ParseLeaseGrant(body);
}

Result<int64_t> EtcdClient::KeepAlive(int64_t lease) {
  ASSIGN_OR_RETURN(std::string body,
                   Call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump()));
  return ParseKeepAlive(body);
}

Status EtcdClient::RevokeLease(int64_t lease) {
  Result<std::string> r = Call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump());
  return r.ok() ? OkStatus() : r.status();
}

Status EtcdClient::Put(std::string_view key, std::string_view value, int64_t lease) {
  json body{{"key", util::Base64Encode(key)}, {"value", util::Base64Encode(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  Result<std::string> r = Call("/v3/kv/put", body.dump());
  if (!r.ok()) return r.status();
  return ParseObject(r.value(), "put").ok() ? OkStatus()
                                            : Unavailable("etcd's put answer is not JSON");
}

Status EtcdClient::Delete(std::string_view key) {
  Result<std::string> r = Call("/v3/kv/deleterange", json{{"key", util::Base64Encode(key)}}.dump());
  return r.ok() ? OkStatus() : r.status();
}

Result<EtcdRange> EtcdClient::RangePrefix(std::string_view prefix) {
  ASSIGN_OR_RETURN(
      std::string body,
      Call("/v3/kv/range", json{{"key", util::Base64Encode(prefix)},
                                {"range_end", util::Base64Encode(PrefixRangeEnd(prefix))}}
                               .dump()));
  return ParseRange(body);
}

std::shared_ptr<UpstreamCall> EtcdClient::Watch(std::string_view prefix, int64_t start_revision,
                                                std::function<void()> on_event,
                                                std::function<void(const std::string&)> on_end) {
  json create{{"key", util::Base64Encode(prefix)},
              {"range_end", util::Base64Encode(PrefixRangeEnd(prefix))}};
  if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);
  UpstreamRequest req;
  req.method = "POST";
  req.target = "/v3/watch";
  req.body = json{{"create_request", create}}.dump();
  req.headers.emplace_back("Content-Type", "application/json");
  UpstreamTimeouts t;
  t.connect = timeout_;
  t.read = std::chrono::milliseconds(0);  // a quiet watch is a healthy one; lookups notice loss
  struct State {
    int status = 0;
    std::string buffer;
    std::string error;
  };
  auto state = std::make_shared<State>();
  UpstreamHandlers h;
  h.on_head = [state](int status, const server::Headers&) { state->status = status; };
  h.on_data = [state, on_event](std::string_view data) {
    state->buffer.append(data);
    if (state->status != 200) {
      if (state->buffer.size() > 4096) state->buffer.resize(4096);
      return true;
    }
    size_t start = 0;
    for (size_t nl; (nl = state->buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
      const std::string_view line(state->buffer.data() + start, nl - start);
      if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
      Status st = ParseWatchMessage(line);
      if (!st.ok()) {
        state->error = st.message();
        return false;
      }
      on_event();
    }
    state->buffer.erase(0, start);
    if (state->buffer.size() > kMaxAnswerBytes) {
      state->error = "a watch message over 16 MiB";
      return false;
    }
    return true;
  };
  h.on_done = [state, on_end](UpstreamOutcome o, const std::string& message) {
    std::string why =
        !state->error.empty() ? state->error
        : state->status != 0 && state->status != 200
            ? "HTTP " + std::to_string(state->status) + ": " + EtcdErrorMessage(state->buffer)
            : std::string(UpstreamOutcomeName(o)) + (message.empty() ? "" : " (" + message + ")");
    on_end(why);
  };
  return client_.Start(endpoint_, std::move(req), t, std::move(h));
}

}  // namespace tachyon::router
