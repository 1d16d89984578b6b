// tachyon serve: the OpenAI-compatible HTTP server over the engine.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "cli/command.h"
#include "engine/serving_engine.h"
#include "kernels/attention.h"
#include "server/api.h"
#include "server/engine_backend.h"
#include "server/http_server.h"
#include "server/tool_calls.h"
#include "util/logging.h"

namespace tachyon::cli {
namespace {

using server::HttpServerOptions;

struct ServeOptions {
  engine::ServingOptions engine;
  int max_queue = 1024;
  HttpServerOptions http;
  std::string api_key;
  std::string tool_call_parser = "auto";
  double shutdown_timeout_s = 30;
};

void PrintServeUsage() {
  std::fprintf(
      stderr,
      "usage: tachyon serve -m MODEL [options]\n\n"
      "  -m, --model MODEL            model to serve (required): a GGUF file, a Hugging Face\n"
      "                               folder, ORG/NAME[:FILE] or hf://ORG/NAME (downloaded to the\n"
      "                               cache when missing; see tachyon pull)\n"
      "  --host ADDR                  address to listen on (default 127.0.0.1)\n"
      "  --port N                     port (default 8080; 0 = any free port)\n"
      "  --served-model-name NAME     model name clients use (default: file name stem)\n"
      "  --api-key KEY                require 'Authorization: Bearer KEY' (or $TACHYON_API_KEY)\n"
      "  --chat-template FILE         Jinja chat template (or a tokenizer_config.json)\n"
      "  --tool-call-parser NAME      how the model writes tool calls: auto (from the chat\n"
      "                               template), hermes, llama3, mistral or none (default auto)\n"
      "  --threads N                  compute threads (default: all hardware threads)\n"
      "  --kv-cache-memory SIZE       KV cache budget, e.g. 512M, 2G (default: enough for\n"
      "                               max-num-seqs full contexts, at most the fraction below\n"
      "                               of the memory available after the weights)\n"
      "  --kv-cache-memory-fraction F share of the available memory the KV cache may take\n"
      "                               by default, in (0, 1] (default 0.5)\n"
      "  --kv-cache-dtype TYPE        KV cache storage: f16 (default), bf16, q8_0 or f32\n"
      "  --quantize TYPE              quantize float weights at load: q8_0, q4_0 or q4_k\n"
      "  --no-generation-config       ignore the model folder's generation_config.json (its\n"
      "                               sampling defaults and extra EOS ids)\n"
      "  --max-num-batched-tokens N   tokens per engine step (default 2048)\n"
      "  --max-num-seqs N             requests generating at once (default 64)\n"
      "  --max-queue N                requests waiting beyond those; more get 429 (default 1024)\n"
      "  --max-model-len N            context length (default: the model's, lowered to what\n"
      "                               the KV cache holds)\n"
      "  --no-prefix-caching          disable prefix caching\n"
      "  --scheduling-policy P        fcfs (default) or priority (the request's `priority`,\n"
      "                               lower first, orders admission and preemption)\n"
      "  --io-threads N               HTTP io threads (default 2)\n"
      "  --max-body-bytes N           larger request bodies get 413 (default 8388608)\n"
      "  --cors                       allow cross-origin requests from any origin\n"
      "  --header-timeout SECONDS     a request header must arrive within this (30; 0 = none)\n"
      "  --keep-alive-timeout SECONDS close a kept-alive connection idle this long (60; 0 = none)\n"
      "  --body-timeout SECONDS       a request body must arrive within this (60; 0 = none)\n"
      "  --max-connections N          refuse (503) connections beyond N open (1024; 0 = no limit)\n"
      "  --max-header-bytes N         larger request headers get 431 (default 16384)\n"
      "  --max-headers N              requests with more header fields get 431 (default 100)\n"
      "  --shutdown-timeout SECONDS   on SIGTERM/SIGINT, let requests finish this long (30)\n");
}

bool ParseSize(const std::string& s, int64_t* out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v <= 0) return false;
  std::string unit(end);
  double mult = 1;
  if (unit == "K" || unit == "KB" || unit == "KiB")
    mult = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MiB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty())
    return false;
  *out = static_cast<int64_t>(v * mult);
  return true;
}

// Seconds, fractions allowed, in [0, 1 day].
bool ParseSeconds(const std::string& s, std::chrono::milliseconds* out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= 0 && v <= 86400)) return false;
  *out = std::chrono::milliseconds(static_cast<int64_t>(v * 1000 + 0.5));
  return true;
}

bool ParseInt(const std::string& s, int64_t lo, int64_t hi, int64_t* out) {
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Returns 0 on success, else the exit code (after printing one error line).
int ParseArgs(int argc, char** argv, ServeOptions* o) {
  if (const char* key = std::getenv("TACHYON_API_KEY")) o->api_key = key;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      PrintServeUsage();
      return -1;
    }
    if (a == "--cors") {
      o->http.cors = true;
      continue;
    }
    if (a == "--no-prefix-caching") {
      o->engine.enable_prefix_caching = false;
      continue;
    }
    if (a == "--no-generation-config") {
      o->engine.use_generation_config = false;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "tachyon serve: error: %s needs a value (or is unknown)\n", a.c_str());
      return 2;
    }
    std::string v = argv[++i];
    int64_t n = 0;
    auto bad = [&](const char* what) {
      std::fprintf(stderr, "tachyon serve: error: %s: '%s' is not %s\n", a.c_str(), v.c_str(),
                   what);
      return 2;
    };
    if (a == "-m" || a == "--model")
      o->engine.model = v;
    else if (a == "--host")
      o->http.host = v;
    else if (a == "--port") {
      if (!ParseInt(v, 0, 65535, &n)) return bad("a port");
      o->http.port = static_cast<int>(n);
    } else if (a == "--served-model-name")
      o->engine.served_name = v;
    else if (a == "--api-key")
      o->api_key = v;
    else if (a == "--chat-template")
      o->engine.chat_template_path = v;
    else if (a == "--tool-call-parser") {
      if (v != "auto" && !server::ParseToolCallFormat(v).ok()) {
        return bad("auto, hermes, llama3, mistral or none");
      }
      o->tool_call_parser = v;
    } else if (a == "--threads") {
      if (!ParseInt(v, 1, 1024, &n)) return bad("a thread count");
      o->engine.threads = static_cast<int>(n);
    } else if (a == "--kv-cache-memory") {
      if (!ParseSize(v, &n)) return bad("a size like 512M");
      o->engine.kv_cache_bytes = n;
    } else if (a == "--kv-cache-memory-fraction") {
      char* end = nullptr;
      const double f = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(f > 0 && f <= 1)) return bad("a fraction in (0, 1]");
      o->engine.kv_memory_fraction = f;
    } else if (a == "--quantize") {
      if (std::string q = v; q != "q8_0" && q != "q4_0" && q != "q4_k")
        return bad("q8_0, q4_0 or q4_k");
      o->engine.quantize = v;
    } else if (a == "--scheduling-policy") {
      if (std::string p = v; p != "fcfs" && p != "priority") return bad("fcfs or priority");
      o->engine.priority_scheduling = std::string(v) == "priority";
    } else if (a == "--kv-cache-dtype") {
      auto dtype = kernels::ParseKvDtype(v);
      if (!dtype.ok()) return bad("f16, bf16, q8_0 or f32");
      o->engine.kv_dtype = *dtype;
    } else if (a == "--max-num-batched-tokens") {
      if (!ParseInt(v, 1, 1 << 24, &n)) return bad("a token count");
      o->engine.max_num_batched_tokens = n;
    } else if (a == "--max-num-seqs") {
      if (!ParseInt(v, 1, 1 << 16, &n)) return bad("a count");
      o->engine.max_num_seqs = static_cast<int>(n);
    } else if (a == "--max-queue") {
      if (!ParseInt(v, 0, 1 << 20, &n)) return bad("a count");
      o->max_queue = static_cast<int>(n);
    } else if (a == "--max-model-len") {
      if (!ParseInt(v, 1, 1 << 24, &n)) return bad("a token count");
      o->engine.max_model_len = n;
    } else if (a == "--io-threads") {
      if (!ParseInt(v, 1, 256, &n)) return bad("a thread count");
      o->http.io_threads = static_cast<int>(n);
    } else if (a == "--max-body-bytes") {
      if (!ParseInt(v, 1024, 1LL << 32, &n)) return bad("a byte count");
      o->http.max_body_bytes = static_cast<size_t>(n);
    } else if (a == "--header-timeout") {
      if (!ParseSeconds(v, &o->http.header_timeout)) return bad("a number of seconds");
    } else if (a == "--keep-alive-timeout") {
      if (!ParseSeconds(v, &o->http.idle_timeout)) return bad("a number of seconds");
    } else if (a == "--body-timeout") {
      if (!ParseSeconds(v, &o->http.body_timeout)) return bad("a number of seconds");
    } else if (a == "--max-connections") {
      if (!ParseInt(v, 0, 1 << 24, &n)) return bad("a count");
      o->http.max_connections = static_cast<size_t>(n);
    } else if (a == "--max-header-bytes") {
      if (!ParseInt(v, 1024, 1 << 24, &n)) return bad("a byte count of at least 1024");
      o->http.max_header_bytes = static_cast<size_t>(n);
    } else if (a == "--max-headers") {
      if (!ParseInt(v, 1, 1 << 20, &n)) return bad("a count");
      o->http.max_headers = static_cast<size_t>(n);
    } else if (a == "--shutdown-timeout") {
      if (!ParseInt(v, 0, 86400, &n)) return bad("a number of seconds");
      o->shutdown_timeout_s = static_cast<double>(n);
    } else {
      std::fprintf(stderr, "tachyon serve: error: unknown option '%s'\n", a.c_str());
      return 2;
    }
  }
  if (o->engine.model.empty()) {
    std::fprintf(stderr, "tachyon serve: error: -m MODEL is required (see --help)\n");
    return 2;
  }
  return 0;
}

template <class Pred>
bool WaitUntil(Pred pred, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

int RunServe(int argc, char** argv) {
  ServeOptions o;
  if (int rc = ParseArgs(argc, argv, &o); rc != 0) return rc < 0 ? 0 : rc;

  // Every thread created from here on inherits the blocked signals; this thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  TLOG(INFO) << "loading " << o.engine.model;
  auto built = engine::BuildServingEngine(o.engine);
  if (!built.ok()) {
    std::fprintf(stderr, "tachyon serve: error: %s\n", built.status().ToString().c_str());
    return 1;
  }
  auto backend = server::EngineBackend::Create(std::move(built).value(), o.max_queue);
  if (!backend.ok()) {
    std::fprintf(stderr, "tachyon serve: error: %s\n", backend.status().ToString().c_str());
    return 1;
  }
  TLOG(INFO) << (*backend)->Summary();
  if (!(*backend)->generation_config_note().empty()) {
    TLOG(INFO) << "generation_config.json defaults: " << (*backend)->generation_config_note();
  }
  server::ApiOptions api_options;
  api_options.served_model_names = {(*backend)->Info().name};
  api_options.api_key = o.api_key;
  api_options.sampling_defaults = (*backend)->sampling_defaults();
  api_options.tool_call_format =
      o.tool_call_parser == "auto"
          ? server::DetectToolCallFormat((*backend)->chat_template_source())
          : *server::ParseToolCallFormat(o.tool_call_parser);
  TLOG(INFO) << "tool-call parser: " << server::ToolCallFormatName(api_options.tool_call_format)
             << (o.tool_call_parser == "auto" ? " (from the chat template)" : "");
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
  std::printf("tachyon serve: ready at http://%s:%d/v1 (model '%s')\n", o.http.host.c_str(),
              http.port(), api.model_name().c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  TLOG(INFO) << "received " << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << ": stopped accepting; "
             << api.InFlight() << " request(s) in flight, waiting up to " << o.shutdown_timeout_s
             << " s";
  http.StopAccepting();
  api.SetDraining(true);
  if (!WaitUntil([&] { return api.InFlight() == 0; }, o.shutdown_timeout_s)) {
    TLOG(WARN) << "shutdown timeout: aborting " << api.InFlight() << " request(s)";
    api.CancelAll();
    WaitUntil([&] { return api.InFlight() == 0; }, 5);
  }
  // Stop the engine before the io threads, so that no output arrives for a closed connection.
  (*backend)->Shutdown();
  WaitUntil([&] { return http.connections() == 0; }, 2);
  http.Stop();
  TLOG(INFO) << "tachyon serve: stopped";
  return 0;
}

}  // namespace

TACHYON_COMMAND(serve, "Serve a model over an OpenAI-compatible HTTP API", RunServe);

}  // namespace tachyon::cli
