#include "server/request_fields.h"

#include <string>

namespace tachyon::server {
namespace {

using nlohmann::json;

struct Refused {
  const char* field;
  const char* why;  // completes "'<field>' is not supported: ..."
};

// OpenAI fields with no implementation here, whatever their value (null aside).
constexpr Refused kChatRefused[] = {
    {"audio", "this server generates text only."},
    {"prediction", "predicted outputs are not implemented."},
    {"web_search_options", "this server has no web search."},
    {"functions", "the deprecated functions API is not implemented; use 'tools'."},
    {"function_call", "the deprecated functions API is not implemented; use 'tool_choice'."},
    {"reasoning_effort", "this server has no reasoning-effort control."},
    {"verbosity", "this server has no verbosity control."},
};

// Extensions of other OpenAI-compatible servers that change what is generated.
constexpr Refused kExtensionRefused[] = {
    {"guided_json", "use 'structured_outputs': {\"json\": ...} or 'response_format'."},
    {"guided_regex", "use 'structured_outputs': {\"regex\": ...}."},
    {"guided_choice", "use 'structured_outputs': {\"choice\": [...]}."},
    {"guided_grammar", "use 'structured_outputs': {\"grammar\": ...} or 'grammar'."},
    {"guided_decoding_backend", "this server has one structured-output backend."},
    {"regex", "use 'structured_outputs': {\"regex\": ...}."},
    {"ebnf", "use 'grammar' (GBNF) or 'structured_outputs': {\"grammar\": ...}."},
    {"use_beam_search", "beam search is not implemented."},
    {"length_penalty", "beam search is not implemented."},
    {"prompt_logprobs", "prompt logprobs are not implemented."},
    {"typical_p", "typical sampling is not implemented."},
    {"mirostat", "mirostat sampling is not implemented."},
    {"mirostat_tau", "mirostat sampling is not implemented."},
    {"mirostat_eta", "mirostat sampling is not implemented."},
    {"tfs_z", "tail-free sampling is not implemented."},
};

const json* Present(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<ApiError> CheckModalities(const json& body) {
  const json* m = Present(body, "modalities");
  if (m == nullptr) return std::nullopt;
  if (!m->is_array()) {
    return InvalidParam("modalities", "Invalid value for 'modalities': expected an array.");
  }
  for (const json& v : *m) {
    if (v != "text") {
      return UnsupportedField("modalities",
                              "this server generates text only; only [\"text\"] is accepted.");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> CheckServiceTier(const json& body) {
  const json* tier = Present(body, "service_tier");
  if (tier == nullptr || *tier == "auto" || *tier == "default") return std::nullopt;
  return UnsupportedField("service_tier",
                          "this server has one service tier; use 'auto' or 'default'.");
}

// Completions: best_of above n would pick a "best" choice server-side.
std::optional<ApiError> CheckBestOf(const json& body) {
  const json* best_of = Present(body, "best_of");
  if (best_of == nullptr) return std::nullopt;
  const json* n = Present(body, "n");
  const json one = 1;
  if (best_of->is_number_integer() && *best_of == (n != nullptr ? *n : one)) return std::nullopt;
  return UnsupportedField("best_of",
                          "server-side best-of selection is not implemented; omit it or set "
                          "it equal to 'n'.");
}

std::optional<ApiError> CheckSuffix(const json& body) {
  const json* suffix = Present(body, "suffix");
  if (suffix == nullptr || *suffix == "") return std::nullopt;
  return UnsupportedField("suffix", "insertion (text after the completion) is not implemented.");
}

}  // namespace

std::optional<ApiError> CheckUnsupportedFields(const json& body, RequestKind kind) {
  if (!body.is_object()) return std::nullopt;
  for (const Refused& r : kExtensionRefused) {
    if (Present(body, r.field)) return UnsupportedField(r.field, r.why);
  }
  if (auto e = CheckServiceTier(body)) return e;
  if (kind == RequestKind::kCompletion) {
    if (auto e = CheckBestOf(body)) return e;
    return CheckSuffix(body);
  }
  for (const Refused& r : kChatRefused) {
    if (Present(body, r.field)) return UnsupportedField(r.field, r.why);
  }
  return CheckModalities(body);
}

}  // namespace tachyon::server
