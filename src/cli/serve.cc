// tachyon serve: the OpenAI-compatible HTTP server over the engine.
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/flags.h"
#include "cli/shutdown.h"
#include "engine/serving_engine.h"
#include "hub/resolve.h"
#include "kv/disk_tier.h"
#include "router/etcd_discovery.h"
#include "server/api.h"
#include "server/engine_backend.h"
#include "server/http_server.h"
#include "server/kv_events.h"
#include "server/pd_service.h"
#include "server/tool_calls.h"
#include "util/logging.h"

namespace tachyon::cli {
namespace serve_cmd {

using server::HttpServerOptions;

struct ServeOptions {
  engine::ServingOptions engine;
  int max_queue = 1024;
  bool allow_special_tokens_in_content = false;
  bool complete_within_max_tokens = false;
  HttpServerOptions http;
  std::string api_key;
  std::string tool_call_parser = "auto";
  double shutdown_timeout_s = 30;
  std::vector<std::string> labels;  // --label k=v
  std::string register_etcd;        // etcd's client URL
  std::string advertise_url;        // how routers reach this replica
  std::string etcd_prefix{router::kDefaultEtcdPrefix};
  int etcd_ttl_s = 5;
  std::string role = "both";    // --role (server/pd_roles.h)
  server::PdServiceOptions pd;  // --kv-port, --kv-inbox-memory, --kv-transfer-timeout
};

// Returns std::nullopt when the options are complete, else the exit code (0 after --help).
std::optional<int> ParseArgs(int argc, char** argv, ServeOptions* o) {
  auto app = NewCommandApp("serve", "Serves a model over an OpenAI-compatible HTTP API.");
  AddEngineFlags(*app, &o->engine);
  app->add_option("--served-model-name", o->engine.served_name,
                  "model name clients use (default: the model file's name stem)");
  app->add_option("--api-key", o->api_key, "require 'Authorization: Bearer KEY'")
      ->envname("TACHYON_API_KEY");
  AddChecked(
      *app, "--tool-call-parser", &o->tool_call_parser,
      [](const std::string& v) {
        return v == "auto" || server::ParseToolCallFormat(v).ok()
                   ? OkStatus()
                   : InvalidArgument("'" + v + "' is not auto, hermes, llama3, mistral or none");
      },
      "how the model writes tool calls: auto (from the chat template), hermes, llama3, "
      "mistral or none");
  AddInt(*app, "--max-queue", &o->max_queue, 0, 1 << 20,
         "requests waiting beyond --max-num-seqs; more get 429");
  AddNumber(*app, "--shutdown-timeout", &o->shutdown_timeout_s, 0, 86400,
            "on SIGTERM/SIGINT, let requests finish this many seconds");
  app->add_option("--label", o->labels,
                  "a label of this replica, KEY=VALUE (repeatable): reported on "
                  "/v1/replica_info and /v1/kv_events, for a router's --weight")
      ->type_name("KEY=VALUE")
      ->each([](const std::string& kv) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) {
          throw BadValue("--label", kv, "KEY=VALUE with a non-empty KEY");
        }
      });
  constexpr const char* kEtcd = "Registration in etcd";
  auto url_check = [](const char* what) {
    return [what](const std::string& v) {
      return router::ParseReplicaUrl(v).ok()
                 ? OkStatus()
                 : InvalidArgument("'" + v + "' is not " + what + ", http://HOST:PORT");
    };
  };
  AddChecked(*app, "--register-etcd", &o->register_etcd, url_check("etcd's client URL"),
             "register this replica in etcd (a key under --etcd-prefix with a lease kept alive; "
             "deleted on SIGTERM before draining) for tachyon route --etcd; needs --advertise-url")
      ->type_name("URL")
      ->group(kEtcd);
  AddChecked(*app, "--advertise-url", &o->advertise_url, url_check("a replica URL"),
             "the URL routers reach this replica at (registered in etcd)")
      ->type_name("URL")
      ->group(kEtcd);
  app->add_option("--etcd-prefix", o->etcd_prefix, "the etcd key prefix to register under")
      ->capture_default_str()
      ->group(kEtcd);
  AddInt(*app, "--etcd-ttl", &o->etcd_ttl_s, 2, 3600,
         "seconds the registration outlives this process when it dies (its lease's TTL)")
      ->group(kEtcd);
  constexpr const char* kPd = "Prefill/decode disaggregation (docs/pd.md)";
  AddChecked(
      *app, "--role", &o->role,
      [](const std::string& v) { return server::ParseReplicaRole(v).status(); },
      "both (default), prefill (runs prompts for decode replicas, sends their KV) or decode "
      "(receives KV on --kv-port)")
      ->group(kPd);
  AddInt(*app, "--kv-port", &o->pd.kv_port, 0, 65535,
         "decode: the KV listener's port on --host (0: any free port; see /v1/replica_info)")
      ->group(kPd);
  AddChecked(
      *app, "--kv-advertise", &o->pd.kv_advertise,
      [](const std::string& v) {
        const size_t colon = v.rfind(':');
        const bool ok = colon != std::string::npos && colon > 0 && colon + 1 < v.size() &&
                        v.find_first_not_of("0123456789", colon + 1) == std::string::npos;
        return ok ? OkStatus() : InvalidArgument("'" + v + "' is not HOST:PORT");
      },
      "decode: the HOST:PORT prefill replicas reach the KV listener at, if not --host and "
      "--kv-port (NAT, a published container port); reported as kv_address")
      ->type_name("HOST:PORT")
      ->group(kPd);
  AddByteSize(*app, "--kv-inbox-memory", &o->pd.inbox_bytes, int64_t{1} << 50,
              "decode: host memory for received KV blocks not used yet (default 1G)")
      ->group(kPd);
  AddNumber(*app, "--kv-transfer-timeout", &o->pd.transfer_timeout_s, 0.1, 3600,
            "decode: the longest wait for the next bytes of a transfer, seconds")
      ->group(kPd);
  app->add_flag("--allow-special-tokens-in-content", o->allow_special_tokens_in_content,
                "tokenize special-token text in chat messages as control tokens (trusted "
                "clients only; by default it is plain text)");
  app->add_flag("--complete-within-max-tokens", o->complete_within_max_tokens,
                "constrained output (response_format, structured_outputs, grammar, tool calls) "
                "always ends its grammar by max_tokens unless a request's "
                "complete_within_max_tokens says otherwise (docs/grammar.md)");
  constexpr const char* kHttp = "HTTP options";
  server::HttpServerOptions& h = o->http;
  app->add_option("--host", h.host, "address to listen on")->capture_default_str()->group(kHttp);
  AddInt(*app, "--port", &h.port, 0, 65535, "port (0: any free port)")->group(kHttp);
  AddInt(*app, "--io-threads", &h.io_threads, 1, 256, "HTTP io threads")->group(kHttp);
  AddInt<size_t>(*app, "--max-body-bytes", &h.max_body_bytes, 1024, size_t{1} << 32,
                 "larger request bodies get 413")
      ->group(kHttp);
  app->add_flag("--cors", h.cors, "allow cross-origin requests from any origin")->group(kHttp);
  AddSeconds(*app, "--header-timeout", &h.header_timeout, 86400,
             "a request header must arrive within this (0: no limit)")
      ->group(kHttp);
  AddSeconds(*app, "--keep-alive-timeout", &h.idle_timeout, 86400,
             "close a kept-alive connection idle this long (0: never)")
      ->group(kHttp);
  AddSeconds(*app, "--body-timeout", &h.body_timeout, 86400,
             "a request body must arrive within this (0: no limit)")
      ->group(kHttp);
  AddInt<size_t>(*app, "--max-connections", &h.max_connections, 0, 1 << 24,
                 "refuse (503) connections beyond this many open (0: no limit)")
      ->group(kHttp);
  AddInt<size_t>(*app, "--max-header-bytes", &h.max_header_bytes, 1024, 1 << 24,
                 "larger request headers get 431")
      ->group(kHttp);
  AddInt<size_t>(*app, "--max-headers", &h.max_headers, 1, 1 << 20,
                 "requests with more header fields get 431")
      ->group(kHttp);
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return rc;
  if (o->register_etcd.empty() != o->advertise_url.empty()) {
    std::fprintf(stderr, "tachyon serve: error: %s\n",
                 o->register_etcd.empty() ? "--advertise-url needs --register-etcd URL"
                                          : "--register-etcd needs --advertise-url URL (how "
                                            "routers reach this replica)");
    return 2;
  }
  if (!o->pd.kv_advertise.empty() && o->role != "decode") {
    std::fprintf(stderr, "tachyon serve: error: --kv-advertise needs --role decode\n");
    return 2;
  }
  if (o->role != "both") {
    // The role is a label too: routers find prefill and decode replicas by it (docs/pd.md).
    const std::string role_label = "role=" + o->role;
    for (const std::string& label : o->labels) {
      if (label.starts_with("role=") && label != role_label) {
        std::fprintf(stderr, "tachyon serve: error: --label %s contradicts --role %s\n",
                     label.c_str(), o->role.c_str());
        return 2;
      }
    }
    o->labels.push_back(role_label);
  }
  if (!o->register_etcd.empty() && o->etcd_prefix.empty()) {
    std::fprintf(stderr, "tachyon serve: error: --etcd-prefix: empty\n");
    return 2;
  }
  return std::nullopt;
}

int RunServe(int argc, char** argv) {
  ServeOptions o;
  if (std::optional<int> rc = ParseArgs(argc, argv, &o)) return *rc;

  TerminationSignals signals;

  // The prefix cache's events, published on GET /v1/kv_events for routers.
  auto kv_events = std::make_shared<kv::KvEventLog>();
  o.engine.kv_events = kv_events;
  o.pd.role = *server::ParseReplicaRole(o.role);
  o.pd.kv_host = o.http.host;
  server::PdService pd(o.pd);
  // A decode replica's received blocks are a KV store the engine loads from, before any tier.
  const auto pd_stores = pd.stores();
  o.engine.kv_stores.insert(o.engine.kv_stores.begin(), pd_stores.begin(), pd_stores.end());
  TLOG(INFO) << "loading " << o.engine.model;
  auto built = engine::BuildServingEngine(o.engine);
  if (!built.ok()) {
    std::fprintf(stderr, "tachyon serve: error: %s\n", built.status().ToString().c_str());
    return 1;
  }
  std::map<std::string, std::string> labels;  // --label KEY=VALUE, checked by the flag
  for (const std::string& label : o.labels) {
    const size_t eq = label.find('=');
    labels[label.substr(0, eq)] = label.substr(eq + 1);
  }
  server::KvEventsOptions kv_events_options;
  kv_events_options.block_size = static_cast<int>(built->block_size);
  kv_events_options.labels = labels;
  auto backend = server::EngineBackend::Create(std::move(built).value(), o.max_queue,
                                               o.allow_special_tokens_in_content);
  if (!backend.ok()) {
    std::fprintf(stderr, "tachyon serve: error: %s\n", backend.status().ToString().c_str());
    return 1;
  }
  TLOG(INFO) << (*backend)->Summary();
  if (!(*backend)->generation_config_note().empty()) {
    TLOG(INFO) << "generation_config.json defaults: " << (*backend)->generation_config_note();
  }
  if (pd.role() != server::ReplicaRole::kBoth) {
    // Both sides must name the model alike: the identity of its files and KV format.
    const engine::ServingEngine& se = (*backend)->serving_engine();
    auto resolved = hub::ResolveModel(o.engine.model);
    Result<kv::BlockHash> id = resolved.ok()
                                   ? kv::ModelKvIdentity(resolved->model_path, "kv-transfer")
                                   : Result<kv::BlockHash>(resolved.status());
    Status st = id.ok() ? pd.Start(se, o.engine.kv_dtype, *id, backend->get()) : id.status();
    if (!st.ok()) {
      std::fprintf(stderr, "tachyon serve: error: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  server::KvEventPublisher kv_publisher(kv_events, backend->get(), kv_events_options);
  server::ApiOptions api_options;
  api_options.kv_events = &kv_publisher;
  api_options.pd = &pd;
  api_options.served_model_names = {(*backend)->Info().name};
  api_options.api_key = o.api_key;
  api_options.sampling_defaults = (*backend)->sampling_defaults();
  api_options.complete_within_max_tokens = o.complete_within_max_tokens;
  api_options.tool_call_format =
      o.tool_call_parser == "auto"
          ? server::DetectToolCallFormat((*backend)->chat_template_source())
          : *server::ParseToolCallFormat(o.tool_call_parser);
  TLOG(INFO) << "tool-call parser: " << server::ToolCallFormatName(api_options.tool_call_format)
             << (o.tool_call_parser == "auto" ? " (from the chat template)" : "");
  api_options.reasoning_end = server::DetectReasoningEnd((*backend)->chat_template_source());
  if (!api_options.reasoning_end.empty()) {
    TLOG(INFO) << "reasoning section: constraints apply after " << api_options.reasoning_end;
  }
  server::OpenAiApi api(backend->get(), std::move(api_options));
  o.http.metrics = &api.metrics().connection_metrics();
  server::HttpServer http(
      o.http, [&api](server::HttpRequest r, std::shared_ptr<server::ResponseChannel> c) {
        api.Handle(std::move(r), std::move(c));
      });
  if (Status st = http.Start(); !st.ok()) {
    std::fprintf(stderr, "tachyon serve: error: %s\n", st.ToString().c_str());
    return 1;
  }
  std::unique_ptr<router::EtcdRegistration> registration;
  if (!o.register_etcd.empty()) {
    auto client = router::EtcdClient::Create(o.register_etcd, std::chrono::milliseconds(2000));
    if (!client.ok()) {
      std::fprintf(stderr, "tachyon serve: error: --register-etcd: %s\n",
                   client.status().message().c_str());
      return 2;
    }
    router::DiscoveredReplica self{*router::ParseReplicaUrl(o.advertise_url), labels};
    registration = std::make_unique<router::EtcdRegistration>(
        std::move(client).value(), std::move(self), o.etcd_prefix, o.etcd_ttl_s);
    registration->Start();
  }
  std::printf("tachyon serve: ready at http://%s:%d/v1 (model '%s')\n", o.http.host.c_str(),
              http.port(), api.model_name().c_str());
  std::fflush(stdout);

  const char* sig = signals.Wait();
  if (registration) {
    // Leave the routers' sets before draining, so none sends a new request here.
    Status st = registration->Deregister();
    if (st.ok()) {
      TLOG(INFO) << "deregistered from etcd (" << registration->key() << ")";
    } else {
      TLOG(WARN) << "deregistering from etcd: " << st.message() << " (the lease expires in "
                 << o.etcd_ttl_s << " s)";
    }
  }
  TLOG(INFO) << "received " << sig << ": stopped accepting; " << api.InFlight()
             << " request(s) in flight, waiting up to " << o.shutdown_timeout_s << " s";
  http.StopAccepting();
  api.SetDraining(true);
  kv_publisher.Drain();  // subscribed routers stop sending new requests here
  if (!WaitUntil([&] { return api.InFlight() == 0; }, o.shutdown_timeout_s)) {
    TLOG(WARN) << "shutdown timeout: aborting " << api.InFlight()
               << " request(s) (a router resumes its streams elsewhere)";
    api.DrainAll();
    WaitUntil([&] { return api.InFlight() == 0; }, 5);
  }
  // Stop the engine before the io threads, so that no output arrives for a closed connection.
  kv_publisher.Stop();
  (*backend)->Shutdown();
  pd.Stop();
  WaitUntil([&] { return http.connections() == 0; }, 2);
  http.Stop();
  TLOG(INFO) << "tachyon serve: stopped";
  return 0;
}

TACHYON_COMMAND(serve, "Serve a model over an OpenAI-compatible HTTP API", RunServe);

}  // namespace serve_cmd

}  // namespace tachyon::cli
