#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace tachyon::server {
namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

void Header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n";
  out += "# TYPE " + name + " " + type + "\n";
}

void Sample(std::string& out, const std::string& name, double v) {
  out += name + " " + Num(v) + "\n";
}

// KV offload tiers (engine/kv_offload.h): one series per tier, labelled tier="host" / "disk".
void RenderKvTiers(const engine::KvOffloadStats& k, std::string& out) {
  struct Series {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const kv::BlockStoreStats&);
  };
  static const Series kSeries[] = {
      {"tachyon_kv_tier_hits_total", "counter", "KV blocks loaded from the tier.",
       [](const kv::BlockStoreStats& s) { return double(s.hits); }},
      {"tachyon_kv_tier_misses_total", "counter", "Tier lookups that stopped at a block it lacked.",
       [](const kv::BlockStoreStats& s) { return double(s.misses); }},
      {"tachyon_kv_tier_stores_total", "counter", "KV blocks the tier accepted.",
       [](const kv::BlockStoreStats& s) { return double(s.stores); }},
      {"tachyon_kv_tier_evictions_total", "counter", "KV blocks the tier dropped or spilled.",
       [](const kv::BlockStoreStats& s) { return double(s.evictions); }},
      {"tachyon_kv_tier_declined_total", "counter",
       "Blocks offered to the tier that it did not take (too large; its writes too far behind).",
       [](const kv::BlockStoreStats& s) { return double(s.declined); }},
      {"tachyon_kv_tier_load_failures_total", "counter", "Failed loads (checksum, I/O, gone).",
       [](const kv::BlockStoreStats& s) { return double(s.load_failures); }},
      {"tachyon_kv_tier_load_seconds_total", "counter", "Time spent loading from the tier.",
       [](const kv::BlockStoreStats& s) { return s.load_seconds; }},
      {"tachyon_kv_tier_blocks", "gauge", "KV blocks held by the tier.",
       [](const kv::BlockStoreStats& s) { return double(s.blocks); }},
      {"tachyon_kv_tier_bytes", "gauge", "Bytes held by the tier.",
       [](const kv::BlockStoreStats& s) { return double(s.bytes); }},
      {"tachyon_kv_tier_capacity_bytes", "gauge", "The tier's bound in bytes.",
       [](const kv::BlockStoreStats& s) { return double(s.capacity_bytes); }},
  };
  if (k.tiers.empty()) return;
  for (const Series& se : kSeries) {
    Header(out, se.name, se.type, se.help);
    for (const engine::KvTierStats& t : k.tiers) {
      out += std::string(se.name) + "{tier=\"" + t.name + "\"} " + Num(se.get(t.store)) + "\n";
    }
  }
  Header(out, "tachyon_kv_offload_loaded_blocks_total", "counter",
         "KV blocks loaded from a tier into the cache instead of being recomputed.");
  Sample(out, "tachyon_kv_offload_loaded_blocks_total", double(k.loaded_blocks));
  Header(out, "tachyon_kv_offload_failed_blocks_total", "counter",
         "KV blocks whose load failed (recomputed instead).");
  Sample(out, "tachyon_kv_offload_failed_blocks_total", double(k.failed_blocks));
  Header(out, "tachyon_kv_offload_offered_blocks_total", "counter",
         "KV blocks evicted from the cache and copied into a tier.");
  Sample(out, "tachyon_kv_offload_offered_blocks_total", double(k.offered_blocks));
  Header(out, "tachyon_kv_offload_offer_seconds_total", "counter",
         "Engine-thread CPU time spent copying evicted KV blocks into a tier.");
  Sample(out, "tachyon_kv_offload_offer_seconds_total", k.offer_seconds);
  Header(out, "tachyon_kv_offload_skipped_by_cost_total", "counter",
         "Tier hits not loaded because recomputing was estimated cheaper.");
  Sample(out, "tachyon_kv_offload_skipped_by_cost_total", double(k.skipped_by_cost));
}

std::vector<double> LatencyBounds() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
          0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
}

std::vector<double> TokenLatencyBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
          0.2,   0.3,    0.4,   0.5,  0.75,  1.0,  2.5,   5.0, 10.0};
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[i]++;
  count_++;
  sum_ += value;
}

void Histogram::Render(const std::string& name, std::string& out) const {
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + Num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + Num(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft_(LatencyBounds()),
      tpot_(TokenLatencyBounds()),
      e2e_(LatencyBounds()),
      queue_(LatencyBounds()) {}

void ServerMetrics::CountRequest(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_[{endpoint, status}]++;
}

void ServerMetrics::ObserveGeneration(double ttft, double tpot, double e2e, double queue) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ttft >= 0) ttft_.Observe(ttft);
  if (tpot >= 0) tpot_.Observe(tpot);
  if (e2e >= 0) e2e_.Observe(e2e);
  if (queue >= 0) queue_.Observe(queue);
}

std::string ServerMetrics::Render(const engine::EngineMetrics& m, bool ready) const {
  std::string out;
  Header(out, "tachyon_ready", "gauge", "1 when the model is loaded and the engine is running.");
  Sample(out, "tachyon_ready", ready ? 1 : 0);
  Header(out, "tachyon_num_requests_running", "gauge", "Requests being generated.");
  Sample(out, "tachyon_num_requests_running", static_cast<double>(m.num_running));
  Header(out, "tachyon_num_requests_waiting", "gauge", "Requests waiting to be scheduled.");
  Sample(out, "tachyon_num_requests_waiting", static_cast<double>(m.num_waiting));
  Header(out, "tachyon_kv_cache_blocks_total", "gauge", "KV cache blocks in the pool.");
  Sample(out, "tachyon_kv_cache_blocks_total", static_cast<double>(m.kv.num_blocks));
  Header(out, "tachyon_kv_cache_blocks_used", "gauge", "KV cache blocks held by requests.");
  Sample(out, "tachyon_kv_cache_blocks_used", static_cast<double>(m.kv.used_blocks));
  Header(out, "tachyon_kv_cache_usage_ratio", "gauge", "Fraction of KV cache blocks in use.");
  Sample(out, "tachyon_kv_cache_usage_ratio",
         m.kv.num_blocks > 0 ? static_cast<double>(m.kv.used_blocks) / m.kv.num_blocks : 0);
  Header(out, "tachyon_prefix_cache_queries_total", "counter",
         "Prompt tokens looked up in the prefix cache.");
  Sample(out, "tachyon_prefix_cache_queries_total", static_cast<double>(m.kv.prefix_query_tokens));
  Header(out, "tachyon_prefix_cache_hits_total", "counter",
         "Prompt tokens found in the prefix cache.");
  Sample(out, "tachyon_prefix_cache_hits_total", static_cast<double>(m.kv.prefix_hit_tokens));
  Header(out, "tachyon_prefix_cache_hit_rate", "gauge",
         "Prefix cache hits / queries since start (0 before any query).");
  Sample(out, "tachyon_prefix_cache_hit_rate",
         m.kv.prefix_query_tokens > 0
             ? static_cast<double>(m.kv.prefix_hit_tokens) / m.kv.prefix_query_tokens
             : 0);
  Header(out, "tachyon_prompt_tokens_total", "counter", "Prompt tokens processed.");
  Sample(out, "tachyon_prompt_tokens_total", static_cast<double>(m.prompt_tokens_received));
  Header(out, "tachyon_generation_tokens_total", "counter", "Tokens generated.");
  Sample(out, "tachyon_generation_tokens_total", static_cast<double>(m.generation_tokens));
  Header(out, "tachyon_num_preemptions_total", "counter", "Requests preempted for KV space.");
  Sample(out, "tachyon_num_preemptions_total", static_cast<double>(m.num_preemptions));
  // Speculative decoding, as vLLM names its counters (all 0 with speculation off).
  Header(out, "tachyon_spec_decode_num_drafts_total", "counter",
         "Verification steps of a sequence with drafted tokens.");
  Sample(out, "tachyon_spec_decode_num_drafts_total", static_cast<double>(m.spec.num_drafts));
  Header(out, "tachyon_spec_decode_num_draft_tokens_total", "counter", "Tokens drafted.");
  Sample(out, "tachyon_spec_decode_num_draft_tokens_total",
         static_cast<double>(m.spec.num_draft_tokens));
  Header(out, "tachyon_spec_decode_num_accepted_tokens_total", "counter",
         "Drafted tokens accepted.");
  Sample(out, "tachyon_spec_decode_num_accepted_tokens_total",
         static_cast<double>(m.spec.num_accepted_tokens));
  Header(out, "tachyon_spec_decode_num_accepted_tokens_per_pos_total", "counter",
         "Drafted tokens accepted at each draft position (0 first).");
  for (size_t i = 0; i < m.spec.accepted_per_position.size(); ++i) {
    out += "tachyon_spec_decode_num_accepted_tokens_per_pos_total{position=\"" + std::to_string(i) +
           "\"} " + std::to_string(m.spec.accepted_per_position[i]) + "\n";
  }
  Header(out, "tachyon_engine_forward_seconds_total", "counter",
         "Engine-thread time in the model's forward passes.");
  Sample(out, "tachyon_engine_forward_seconds_total", m.forward_seconds);
  RenderKvTiers(m.kv_offload, out);

  connections_.Render(out);

  std::lock_guard<std::mutex> lock(mu_);
  Header(out, "tachyon_http_requests_total", "counter", "Finished HTTP requests.");
  for (const auto& [key, count] : requests_) {
    out += "tachyon_http_requests_total{endpoint=\"" + key.first + "\",status=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(count) + "\n";
  }
  Header(out, "tachyon_time_to_first_token_seconds", "histogram",
         "Time from request arrival to the first generated token.");
  ttft_.Render("tachyon_time_to_first_token_seconds", out);
  Header(out, "tachyon_time_per_output_token_seconds", "histogram",
         "Mean time between generated tokens of a request, after the first.");
  tpot_.Render("tachyon_time_per_output_token_seconds", out);
  Header(out, "tachyon_e2e_request_latency_seconds", "histogram",
         "Time from request arrival to its last token.");
  e2e_.Render("tachyon_e2e_request_latency_seconds", out);
  Header(out, "tachyon_request_queue_time_seconds", "histogram",
         "Time a request waited before it was first scheduled.");
  queue_.Render("tachyon_request_queue_time_seconds", out);
  return out;
}

}  // namespace tachyon::server
