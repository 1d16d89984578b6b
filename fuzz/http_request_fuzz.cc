// libFuzzer target: arbitrary bytes as an HTTP/1.1 request stream, through Beast's request
// parser with the server's limits (HttpServerOptions: body size, header bytes and count), then
// every complete request into OpenAiApi::Handle on a FakeBackend, as the io thread hands it
// over. Each request must get one answer that is not a 5xx (the fake backend has no
// failures), with an OpenAI-shaped error body when it is a 4xx; nothing may crash or throw.
//
//   scripts/fuzz.sh 60 http_request_fuzz
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "server/api.h"
#include "server/http_server.h"
#include "server/testing/fake_backend.h"
#include "server/testing/test_channel.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using namespace tachyon::server;

OpenAiApi& Api() {
  static FakeBackend* backend = [] {
    FakeBackendOptions o;
    o.context_length = 64;  // short generations keep executions fast
    o.step_interval = std::chrono::microseconds(0);
    return new FakeBackend(o);
  }();
  static OpenAiApi* api = [] {
    ApiOptions o;
    o.served_model_names = {"tiny"};
    return new OpenAiApi(backend, o);
  }();
  return *api;
}

// The io thread's conversion (server/http_server.cc): lower-case header names, path without
// the query.
HttpRequest ToRequest(http::request<http::string_body>& msg) {
  HttpRequest req;
  req.method = std::string(msg.method_string());
  std::string target(msg.target());
  req.path = target.substr(0, target.find('?'));
  for (const auto& field : msg) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    req.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  req.body = std::move(msg.body());
  return req;
}

void Serve(HttpRequest req) {
  auto ch = std::make_shared<TestChannel>();
  Api().Handle(std::move(req), ch);
  if (!ch->Pump(std::chrono::milliseconds(20000))) __builtin_trap();  // never answered
  const HttpResponse& r = ch->response;
  if (ch->streaming) return;  // a stream: its events are checked by the server's own tests
  if (r.status < 200 || r.status >= 500) __builtin_trap();
  if (r.status >= 400) {
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_discarded() || !j.contains("error") || !j["error"].contains("message")) {
      __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const HttpServerOptions limits;
  beast::string_view rest(reinterpret_cast<const char*>(data), size);
  for (int requests = 0; requests < 4 && !rest.empty(); ++requests) {
    http::request_parser<http::string_body> parser;
    parser.eager(true);
    parser.body_limit(limits.max_body_bytes);
    parser.header_limit(static_cast<uint32_t>(limits.max_header_bytes));
    beast::error_code ec;
    size_t used = parser.put(boost::asio::buffer(rest.data(), rest.size()), ec);
    if (!ec && !parser.is_done()) {
      parser.put_eof(ec);  // the client closed the connection
    }
    if (ec || !parser.is_done()) return 0;
    rest.remove_prefix(used);
    auto msg = parser.release();
    size_t fields = 0;
    for (auto it = msg.begin(); it != msg.end(); ++it) ++fields;
    if (fields > limits.max_headers) return 0;  // the server answers 431 before any handler
    Serve(ToRequest(msg));
  }
  return 0;
}
