// tachyon route: an OpenAI-compatible router in front of `tachyon serve` replicas.
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/shutdown.h"
#include "router/dns_discovery.h"
#include "router/etcd_discovery.h"
#include "router/prompt_keys.h"
#include "router/router.h"
#include "server/http_server.h"
#include "util/logging.h"

namespace tachyon::cli {
namespace route_cmd {

struct RouteOptions {
  std::vector<std::string> replicas;
  std::vector<std::string> prefill, decode;  // --prefill / --decode (docs/pd.md)
  std::string dns;                           // --dns NAME:PORT
  std::chrono::milliseconds dns_interval{5000};
  std::string etcd;  // --etcd URL
  std::string etcd_prefix{router::kDefaultEtcdPrefix};
  std::chrono::milliseconds etcd_interval{2000};
  std::vector<std::string> weights;  // --weight KEY=VALUE:PERCENT
  std::string policy = "kv";
  std::string prompt_cost = "shared";
  std::string tokenizer;
  std::string chat_template;
  router::RouterOptions router;
  server::HttpServerOptions http;
  double shutdown_timeout_s = 30;
  int64_t seed = 0;
};

std::optional<int> ParseArgs(int argc, char** argv, RouteOptions* o) {
  auto app = NewCommandApp("route", "Routes OpenAI API requests over tachyon serve replicas.");
  constexpr const char* kDiscovery = "Replicas (one of --replica, --dns, --etcd)";
  app->add_option("--replica", o->replicas, "a replica's base URL, http://HOST:PORT (repeatable)")
      ->type_name("URL")
      ->group(kDiscovery)
      ->each([](const std::string& url) {
        auto e = router::ParseReplicaUrl(url);
        if (!e.ok()) throw CLI::ValidationError("--replica", e.status().message());
      });
  // Prefill/decode disaggregation (docs/pd.md): a static list's replicas with a role label.
  for (auto [flag, list, role] : {std::tuple{"--prefill", &o->prefill, "prefill"},
                                  std::tuple{"--decode", &o->decode, "decode"}}) {
    app->add_option(flag, *list,
                    std::string("a replica started with tachyon serve --role ") + role +
                        ", http://HOST:PORT (repeatable; with --replica or alone)")
        ->type_name("URL")
        ->group(kDiscovery)
        ->each([name = flag](const std::string& url) {
          auto e = router::ParseReplicaUrl(url);
          if (!e.ok()) throw CLI::ValidationError(name, e.status().message());
        });
  }
  AddInt(*app, "--pd-min-prompt-tokens", &o->router.pd.min_prompt_tokens, 0, 1 << 30,
         "prefill/decode: a prompt whose part not cached on the decode replica is shorter "
         "than this skips the prefill replicas")
      ->group(kDiscovery);
  AddChecked(
      *app, "--dns", &o->dns,
      [](const std::string& v) { return router::ParseDnsTarget(v).status(); },
      "every address NAME resolves to (A / AAAA, e.g. a Kubernetes headless Service) is a "
      "replica http://ADDRESS:PORT, resolved again every --dns-interval")
      ->type_name("NAME:PORT")
      ->group(kDiscovery);
  AddSeconds(*app, "--dns-interval", &o->dns_interval, 86400,
             "how often --dns is resolved again (a failed lookup keeps the last set)")
      ->group(kDiscovery);
  AddChecked(
      *app, "--etcd", &o->etcd,
      [](const std::string& v) {
        return router::ParseReplicaUrl(v).ok()
                   ? OkStatus()
                   : InvalidArgument("'" + v + "' is not etcd's client URL, http://HOST:PORT");
      },
      "etcd's client URL: the replicas are those registered under --etcd-prefix (tachyon "
      "serve --register-etcd), watched; while etcd is unreachable the last set stays")
      ->type_name("URL")
      ->group(kDiscovery);
  app->add_option("--etcd-prefix", o->etcd_prefix, "the etcd key prefix replicas register under")
      ->capture_default_str()
      ->group(kDiscovery);
  AddSeconds(*app, "--etcd-interval", &o->etcd_interval, 3600,
             "how often the etcd prefix is read again besides the watch")
      ->group(kDiscovery);
  AddChoice(*app, "--policy", &o->policy, {"kv", "round_robin", "random"},
            "replica choice: kv (cached prefix + load), round_robin or random");
  app->add_option("--tokenizer", o->tokenizer,
                  "the served model's file (GGUF), tokenizer.json or folder: the router "
                  "tokenizes prompts with it to find cached prefixes (needed by --policy kv)")
      ->type_name("PATH");
  app->add_option("--chat-template", o->chat_template,
                  "the chat template the replicas use, if not the tokenizer's own")
      ->type_name("FILE");
  router::RouterOptions& r = o->router;
  AddInt(*app, "--load-weight", &r.pool.picker.load_weight, 0, 1 << 20,
         "kv: prompt tokens one in-flight request weighs in a replica's score");
  AddNumber(*app, "--balance-ratio", &r.pool.picker.balance_ratio, 1.0, 1000.0,
            "kv: no replica above this times the least loaded one's in-flight (+1) ...");
  AddInt(*app, "--balance-slack", &r.pool.picker.balance_slack, 1, 1 << 20,
         "kv: ... unless within this many of the least loaded one's in-flight");
  AddChoice(*app, "--prompt-cost", &o->prompt_cost, {"shared", "own"},
            "kv: a prompt's uncached tokens count once for each request pending on the replica "
            "and itself (shared: they wait for the same step) or once (own)");
  AddInt(*app, "--seed", &o->seed, int64_t{0}, int64_t{1} << 62, "seed of the tie-breaking RNG");
  AddInt<size_t>(*app, "--index-blocks", &r.pool.index_blocks, 1, size_t{1} << 32,
                 "prefix index capacity in blocks (least recently used forgotten beyond)");
  AddInt(*app, "--max-in-flight", &r.pool.max_in_flight, 1, 1 << 20,
         "requests in flight per replica before it counts as saturated");
  AddInt(*app, "--max-queue", &r.max_queue, 0, 1 << 20,
         "requests waiting for a slot when every replica is saturated; more get 429");
  AddSeconds(*app, "--queue-timeout", &r.queue_timeout, 86400,
             "a queued request not placed within this gets 503");
  AddInt(*app, "--max-retries", &r.max_retries, 0, router::kMaxReplicas,
         "attempts on other replicas after a failure before any output was sent");
  AddSeconds(*app, "--connect-timeout", &r.timeouts.connect, 3600,
             "connecting to a replica (0: no limit)");
  AddSeconds(*app, "--read-timeout", &r.timeouts.read, 86400,
             "a replica's response head must arrive within this, and each later read unless "
             "--stream-idle-timeout says otherwise (0: no limit)");
  AddSeconds(*app, "--stream-idle-timeout", &r.timeouts.idle, 86400,
             "once a replica's answer began, each further piece must arrive within this: a "
             "silent stream is cut and migrated (0: --read-timeout)");
  AddSeconds(*app, "--probe-interval", &r.probe_interval, 3600,
             "how often each replica's /ready is probed (at least every 0.01)");
  AddSeconds(*app, "--probe-timeout", &r.probe_timeout, 3600,
             "a probe's connect and read limit (0: no limit)");
  AddInt(*app, "--upstream-threads", &r.upstream_threads, 1, 256, "io threads towards replicas");
  app->add_option("--replica-api-key", r.replica_api_key,
                  "the replicas' API key, for the router's own calls (GET /v1/kv_events)")
      ->envname("TACHYON_REPLICA_API_KEY");
  app->add_option("--weight", o->weights,
                  "canary: send PERCENT of new requests to the replicas labelled KEY=VALUE "
                  "(tachyon serve --label; repeatable, shares summing to at most 100)")
      ->type_name("KEY=VALUE:PERCENT")
      ->each([](const std::string& w) {
        auto parsed = router::ParseLabelWeight(w);
        if (!parsed.ok()) throw CLI::ValidationError("--weight", parsed.status().message());
      });
  bool no_kv_events = false;
  app->add_flag("--no-kv-events", no_kv_events,
                "do not subscribe to the replicas' KV events: the prefix index is the router's "
                "own routing history");
  AddNumber(*app, "--shutdown-timeout", &o->shutdown_timeout_s, 0, 86400,
            "on SIGTERM/SIGINT, let requests finish this many seconds");
  constexpr const char* kHttp = "HTTP options";
  server::HttpServerOptions& h = o->http;
  app->add_option("--host", h.host, "address to listen on")->capture_default_str()->group(kHttp);
  AddInt(*app, "--port", &h.port, 0, 65535, "port (0: any free port)")->group(kHttp);
  AddInt(*app, "--io-threads", &h.io_threads, 1, 256, "HTTP io threads")->group(kHttp);
  AddInt<size_t>(*app, "--max-body-bytes", &h.max_body_bytes, 1024, size_t{1} << 32,
                 "larger request bodies get 413")
      ->group(kHttp);
  AddInt<size_t>(*app, "--max-connections", &h.max_connections, 0, 1 << 24,
                 "refuse (503) connections beyond this many open (0: no limit)")
      ->group(kHttp);
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return rc;
  r.kv_events = !no_kv_events;
  double shares = 0;
  for (const std::string& w : o->weights) {
    r.pool.weights.push_back(*router::ParseLabelWeight(w));
    shares += r.pool.weights.back().percent;
  }
  if (shares > 100) {
    std::fprintf(stderr, "tachyon route: error: --weight: the shares sum to %g, above 100\n",
                 shares);
    return 2;
  }
  const bool listed = !o->replicas.empty() || !o->prefill.empty() || !o->decode.empty();
  const int sources = listed + !o->dns.empty() + !o->etcd.empty();
  if (sources != 1) {
    std::fprintf(stderr, "tachyon route: error: %s\n",
                 sources == 0 ? "name the replicas: --replica URL (repeatable), --dns NAME:PORT "
                                "or --etcd URL"
                              : "--replica (--prefill, --decode), --dns and --etcd exclude each "
                                "other: pass one");
    return 2;
  }
  if (o->etcd_prefix.empty()) {
    std::fprintf(stderr, "tachyon route: error: --etcd-prefix: empty (every key of etcd)\n");
    return 2;
  }
  if (!o->prefill.empty() && o->decode.empty() && o->replicas.empty()) {
    std::fprintf(stderr,
                 "tachyon route: error: --prefill needs --decode (or --replica) replicas "
                 "that answer the requests\n");
    return 2;
  }
  if (!o->prefill.empty() && o->tokenizer.empty()) {
    std::fprintf(stderr,
                 "tachyon route: error: --prefill needs --tokenizer (the prompt's length "
                 "decides whether it goes through a prefill replica)\n");
    return 2;
  }
  if (o->replicas.size() + o->prefill.size() + o->decode.size() >
      static_cast<size_t>(router::kMaxReplicas)) {
    std::fprintf(stderr, "tachyon route: error: --replica: at most %d replicas\n",
                 router::kMaxReplicas);
    return 2;
  }
  if (o->policy == "kv" && o->tokenizer.empty()) {
    std::fprintf(stderr,
                 "tachyon route: error: --policy kv needs --tokenizer (the served model's file) "
                 "to find cached prefixes; or pass --policy round_robin\n");
    return 2;
  }
  return std::nullopt;
}

int RunRoute(int argc, char** argv) {
  RouteOptions o;
  if (std::optional<int> rc = ParseArgs(argc, argv, &o)) return *rc;
  o.router.pool.picker.policy = *router::ParsePolicy(o.policy);
  o.router.pool.picker.shared_prompt_cost = o.prompt_cost == "shared";
  o.router.pool.picker.seed = static_cast<uint64_t>(o.seed);

  TerminationSignals signals;

  std::unique_ptr<router::PromptKeys> keys;
  if (!o.tokenizer.empty()) {
    auto loaded =
        router::PromptKeys::Load(o.tokenizer, o.chat_template, o.router.pool.picker.block_size);
    if (!loaded.ok()) {
      std::fprintf(stderr, "tachyon route: error: %s\n", loaded.status().ToString().c_str());
      return 1;
    }
    keys = std::move(loaded).value();
  }
  std::unique_ptr<router::Discovery> discovery;
  std::string source;
  if (!o.dns.empty()) {
    discovery = std::make_unique<router::DnsDiscovery>(*router::ParseDnsTarget(o.dns),
                                                       o.dns_interval, router::SystemResolver());
    source = "dns " + o.dns;
  } else if (!o.etcd.empty()) {
    auto client = router::EtcdClient::Create(o.etcd, o.router.timeouts.connect.count() > 0
                                                         ? o.router.timeouts.connect
                                                         : std::chrono::milliseconds(2000));
    if (!client.ok()) {
      std::fprintf(stderr, "tachyon route: error: --etcd: %s\n", client.status().message().c_str());
      return 2;
    }
    discovery = std::make_unique<router::EtcdDiscovery>(std::move(client).value(), o.etcd_prefix,
                                                        o.etcd_interval);
    source = "etcd " + o.etcd;
  } else {
    std::vector<router::DiscoveredReplica> set;
    for (auto [urls, role] : {std::pair{&o.replicas, ""}, std::pair{&o.prefill, "prefill"},
                              std::pair{&o.decode, "decode"}}) {
      for (const std::string& url : *urls) {
        set.push_back({*router::ParseReplicaUrl(url), {}});
        if (*role) set.back().labels[router::kRoleLabel] = role;
      }
    }
    source = std::to_string(set.size()) + " replicas";
    if (!o.prefill.empty() || !o.decode.empty()) {
      source += " (" + std::to_string(o.prefill.size()) + " prefill, " +
                std::to_string(o.decode.size()) + " decode)";
    }
    discovery = router::NewStaticDiscovery(std::move(set));
  }

  router::Router router(o.router, keys.get());
  router.Start(std::move(discovery));
  server::HttpServer http(
      o.http, [&router](server::HttpRequest r, std::shared_ptr<server::ResponseChannel> c) {
        router.Handle(std::move(r), std::move(c));
      });
  if (Status st = http.Start(); !st.ok()) {
    std::fprintf(stderr, "tachyon route: error: %s\n", st.ToString().c_str());
    return 1;
  }
  std::printf("tachyon route: ready at http://%s:%d/v1 (%s, policy %s)\n", o.http.host.c_str(),
              http.port(), source.c_str(), o.policy.c_str());
  std::fflush(stdout);

  const char* sig = signals.Wait();
  TLOG(INFO) << "received " << sig << ": stopped accepting; " << router.InFlight()
             << " request(s) in flight, waiting up to " << o.shutdown_timeout_s << " s";
  router.Drain();
  http.StopAccepting();
  if (!WaitUntil([&] { return router.InFlight() == 0; }, o.shutdown_timeout_s)) {
    TLOG(WARN) << "shutdown timeout: " << router.InFlight() << " request(s) cut";
  }
  router.Stop();
  WaitUntil([&] { return http.connections() == 0; }, 2);
  http.Stop();
  TLOG(INFO) << "tachyon route: stopped";
  return 0;
}

TACHYON_COMMAND(route, "Route OpenAI API requests over tachyon serve replicas", RunRoute);

}  // namespace route_cmd

}  // namespace tachyon::cli
