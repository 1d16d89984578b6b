#include "server/protocol.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>

#include "server/constraint_fields.h"
#include "server/field_reader.h"
#include "server/request_fields.h"

namespace tachyon::server {

using nlohmann::json;

json ApiError::ToJson() const {
  json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return json{{"error", std::move(e)}};
}

std::string ApiError::Body() const {
  return DumpJson(ToJson());
}

ApiError InvalidParam(std::string param, std::string message) {
  ApiError e;
  e.http_status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

ApiError UnsupportedField(const std::string& field, const std::string& why) {
  return InvalidParam(field, "'" + field + "' is not supported: " + why);
}

HttpResponse ErrorResponse(const ApiError& error, std::string body) {
  HttpResponse r;
  r.status = error.http_status;
  r.body = std::move(body);
  if (error.retry_after_s > 0) {
    r.headers.emplace_back("Retry-After", std::to_string(error.retry_after_s));
  }
  if (!error.allow.empty()) r.headers.emplace_back("Allow", error.allow);
  return r;
}

ApiError ApiErrorFromStatus(const Status& status) {
  ApiError e;
  e.http_status = HttpStatus(status.code());
  e.message = status.message();
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kPayloadTooLarge:
      e.type = "invalid_request_error";
      break;
    case StatusCode::kNotFound:
      e.type = "invalid_request_error";
      e.code = "model_not_found";
      break;
    case StatusCode::kUnauthenticated:
      e.type = "authentication_error";
      e.code = "invalid_api_key";
      break;
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable:
      e.type = "server_overloaded";
      e.retry_after_s = 1;
      break;
    default:
      e.type = "server_error";
      break;
  }
  return e;
}

std::string DumpJson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

// Parses logit_bias: {"<token id>": bias in [-100, 100]}.
void ReadLogitBias(FieldReader& r, int vocab_size, sampling::SamplingParams& s) {
  const json* v = r.Raw("logit_bias");
  if (v == nullptr) return;
  if (!v->is_object()) return r.Fail("logit_bias", "expected an object of token ids to biases.");
  std::map<int32_t, float> biases;  // "7" and "07" name the same token: the last one counts
  for (const auto& [key, bias] : v->items()) {
    int id = -1;
    auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || ptr != key.data() + key.size() || id < 0 || id >= vocab_size) {
      return r.Fail("logit_bias",
                    "'" + key + "' is not a token id in [0, " + std::to_string(vocab_size) + ").");
    }
    if (!bias.is_number() || bias.get<double>() < -100 || bias.get<double>() > 100) {
      return r.Fail("logit_bias", "biases must be numbers between -100 and 100.");
    }
    biases[id] = bias.get<float>();
  }
  s.logit_bias.assign(biases.begin(), biases.end());
}

// Parses stop_token_ids: token ids that end a choice (besides EOS), excluded from the text.
void ReadStopTokenIds(FieldReader& r, int vocab_size, sampling::SamplingParams& s) {
  const json* v = r.Raw("stop_token_ids");
  if (v == nullptr || r.failed()) return;
  if (!v->is_array() || v->size() > static_cast<size_t>(kMaxStopTokenIds)) {
    return r.Fail("stop_token_ids", "expected an array of at most " +
                                        std::to_string(kMaxStopTokenIds) + " token ids.");
  }
  for (const auto& t : *v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab_size) {
      return r.Fail("stop_token_ids",
                    "token ids must be integers in [0, " + std::to_string(vocab_size) + ").");
    }
    s.stop_token_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
}

// Parses the continuation extensions resume_token_ids and return_token_ids (CommonParams).
// REQUIRES: n, max_tokens and min_tokens already read.
void ReadResume(FieldReader& r, int vocab_size, CommonParams& c) {
  c.return_token_ids = r.Bool("return_token_ids").value_or(false);
  const json* v = r.Raw("resume_token_ids");
  if (v == nullptr || v->is_null() || r.failed()) return;
  if (!v->is_array() || v->empty() || v->size() > kMaxResumeTokens) {
    return r.Fail("resume_token_ids", "expected a non-empty array of at most " +
                                          std::to_string(kMaxResumeTokens) + " token ids.");
  }
  for (const auto& t : *v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab_size) {
      return r.Fail("resume_token_ids",
                    "token ids must be integers in [0, " + std::to_string(vocab_size) + ").");
    }
    c.resume_token_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  if (c.n != 1) return r.Fail("resume_token_ids", "only allowed with n = 1.");
  sampling::SamplingParams& s = c.sampling;
  const int k = static_cast<int>(c.resume_token_ids.size());
  if (c.max_tokens_set) {
    if (k >= s.max_tokens) {
      return r.Fail("resume_token_ids", "resumes " + std::to_string(k) +
                                            " tokens, which leaves nothing of max_tokens = " +
                                            std::to_string(s.max_tokens) + ".");
    }
    s.max_tokens -= k;
  }
  s.min_tokens = std::max(0, s.min_tokens - k);
  s.output_offset = k;
}

// Parses kv_transfer_params {"address": "HOST:PORT", "transfer_id": "..."} (CommonParams).
void ReadKvTransfer(FieldReader& r, CommonParams& c) {
  const json* v = r.Raw("kv_transfer_params");
  if (v == nullptr || v->is_null() || r.failed()) return;
  if (!v->is_object()) return r.Fail("kv_transfer_params", "expected an object.");
  FieldReader kr(*v, "kv_transfer_params.");
  auto address = kr.String("address");
  auto id = kr.String("transfer_id");
  if (kr.failed()) return r.Fail("kv_transfer_params", kr.error().message);
  if (!address || address->empty() || address->size() > 512 ||
      address->find(':') == std::string::npos) {
    return r.Fail("kv_transfer_params", "'address' must be the decode replica's HOST:PORT.");
  }
  if (id && id->size() > 256) {
    return r.Fail("kv_transfer_params", "'transfer_id' is longer than 256 bytes.");
  }
  if (c.n != 1) return r.Fail("kv_transfer_params", "only allowed with n = 1.");
  c.kv_transfer.address = std::move(*address);
  c.kv_transfer.transfer_id = id.value_or("");
}

// Reads one prompt given as an array of token ids.
bool ReadTokenIds(FieldReader& r, const json& arr, int vocab_size, std::vector<int32_t>& out) {
  for (const auto& t : arr) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab_size) {
      r.Fail("prompt", "token ids must be integers in [0, " + std::to_string(vocab_size) + ").");
      return false;
    }
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  if (out.empty()) {
    r.Fail("prompt", "a prompt of token ids must not be empty.");
    return false;
  }
  return true;
}

void ReadPrompts(FieldReader& r, int vocab_size, std::vector<PromptInput>& prompts) {
  const json* p = r.Raw("prompt");
  if (r.failed()) return;
  if (p == nullptr) return r.Fail("prompt", "'prompt' is required.");
  constexpr size_t kMaxPrompts = 64;
  if (p->is_string()) {
    prompts.emplace_back(p->get<std::string>());
    return;
  }
  if (!p->is_array() || p->empty()) {
    return r.Fail("prompt",
                  "expected a string, an array of strings, an array of token ids or "
                  "an array of arrays of token ids.");
  }
  if (p->size() > kMaxPrompts && !(*p)[0].is_number()) {
    return r.Fail("prompt", "at most " + std::to_string(kMaxPrompts) + " prompts per request.");
  }
  if ((*p)[0].is_number()) {
    std::vector<int32_t> ids;
    if (ReadTokenIds(r, *p, vocab_size, ids)) prompts.emplace_back(std::move(ids));
    return;
  }
  for (const auto& item : *p) {
    if (item.is_string()) {
      prompts.emplace_back(item.get<std::string>());
    } else if (item.is_array()) {
      std::vector<int32_t> ids;
      if (!ReadTokenIds(r, item, vocab_size, ids)) return;
      prompts.emplace_back(std::move(ids));
    } else {
      return r.Fail("prompt", "each prompt must be a string or an array of token ids.");
    }
  }
}

}  // namespace

ApiResult<CommonParams> ParseCommonParams(const json& body, int vocab_size, bool is_chat,
                                          const SamplingDefaults& d) {
  CommonParams c;
  sampling::SamplingParams& s = c.sampling;
  FieldReader r(body);
  c.model = r.String("model").value_or("");
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  std::optional<int64_t> max_tokens = r.Int("max_tokens", 1, kIntMax);
  if (is_chat) {
    if (auto mct = r.Int("max_completion_tokens", 1, kIntMax)) max_tokens = mct;
  }
  if (max_tokens) {
    s.max_tokens = static_cast<int>(*max_tokens);
    c.max_tokens_set = true;
  }
  s.temperature = static_cast<float>(r.Number("temperature", 0, 2).value_or(d.temperature));
  // (0, hi] ranges are checked on the double: a positive value under float's range (1e-300) is
  // valid and becomes the smallest positive float instead of 0.
  auto positive = [](double v) {
    return std::max(static_cast<float>(v), std::numeric_limits<float>::min());
  };
  const std::optional<double> top_p = r.Number("top_p", 0, 1);
  if (top_p && *top_p <= 0) r.Fail("top_p", "must be greater than 0 and at most 1.");
  s.top_p = top_p ? positive(*top_p) : d.top_p;
  s.top_k = static_cast<int>(r.Int("top_k", -1, kIntMax).value_or(d.top_k));
  if (s.top_k < 0) s.top_k = 0;
  s.min_p = static_cast<float>(r.Number("min_p", 0, 1).value_or(d.min_p));
  s.presence_penalty = static_cast<float>(r.Number("presence_penalty", -2, 2).value_or(0.0));
  s.frequency_penalty = static_cast<float>(r.Number("frequency_penalty", -2, 2).value_or(0.0));
  const std::optional<double> rep = r.Number("repetition_penalty", 0, 10);
  s.repetition_penalty = rep ? positive(*rep) : d.repetition_penalty;
  if (rep && *rep <= 0) {
    r.Fail("repetition_penalty", "must be greater than 0.");
  }
  ReadLogitBias(r, vocab_size, s);
  if (auto seed =
          r.Int("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    s.seed = static_cast<uint64_t>(*seed);
  }
  if (auto stop = r.StringOrList("stop", kMaxStopStrings)) {
    for (auto& str : *stop) {
      if (str.size() > kMaxStopStringBytes) {
        r.Fail("stop", "each stop string may be at most " + std::to_string(kMaxStopStringBytes) +
                           " bytes long.");
        break;
      }
      if (!str.empty()) s.stop.push_back(std::move(str));
    }
  }
  ReadStopTokenIds(r, vocab_size, s);
  s.ignore_eos = r.Bool("ignore_eos").value_or(false);
  if (auto min_tokens = r.Int("min_tokens", 0, kIntMax)) {
    s.min_tokens = static_cast<int>(*min_tokens);
    if (c.max_tokens_set && s.min_tokens > s.max_tokens && !r.failed()) {
      r.Fail("min_tokens", "must not exceed max_tokens (" + std::to_string(s.max_tokens) + ").");
    }
  }
  if (auto salt = r.String("cache_salt")) {
    if (salt->empty() || salt->size() > kMaxCacheSaltBytes) {
      r.Fail("cache_salt", "must be a non-empty string of at most " +
                               std::to_string(kMaxCacheSaltBytes) + " bytes.");
    }
    c.cache_salt = std::move(*salt);
  }
  c.priority = static_cast<int>(r.Int("priority", -1000000, 1000000).value_or(0));
  c.n = static_cast<int>(r.Int("n", 1, kMaxN).value_or(1));
  c.stream = r.Bool("stream").value_or(false);
  ReadResume(r, vocab_size, c);
  ReadKvTransfer(r, c);
  c.user = r.String("user").value_or("");
  if (const json* so = r.Raw("stream_options")) {
    if (!so->is_object()) {
      r.Fail("stream_options", "expected an object.");
    } else if (!c.stream) {
      r.Fail("stream_options", "only allowed when 'stream' is true.");
    } else {
      FieldReader sr(*so, "stream_options.");
      c.include_usage = sr.Bool("include_usage").value_or(false);
      if (sr.failed()) return sr.error();
    }
  }
  if (!is_chat) {
    if (auto lp = r.Int("logprobs", 0, kMaxLogprobs)) s.logprobs = static_cast<int>(*lp);
  }
  if (r.failed()) return r.error();
  return c;
}

ApiResult<CompletionRequest> ParseCompletionRequest(const nlohmann::ordered_json& ordered_body,
                                                    int vocab_size,
                                                    const SamplingDefaults& defaults) {
  const json body = ordered_body;
  if (auto e = CheckUnsupportedFields(body, RequestKind::kCompletion)) return *e;
  auto common = ParseCommonParams(body, vocab_size, /*is_chat=*/false, defaults);
  if (!common.ok()) return common.error();
  CompletionRequest req;
  req.common = std::move(common.value());
  auto constraint = ParseConstraintFields(ordered_body);
  if (!constraint.ok()) return constraint.error();
  req.common.constraint = std::move(constraint.value());
  FieldReader r(body);
  ReadPrompts(r, vocab_size, req.prompts);
  req.echo = r.Bool("echo").value_or(false);
  if (!req.common.resume_token_ids.empty() && !r.failed()) {
    if (req.prompts.size() != 1) r.Fail("resume_token_ids", "only allowed with one prompt.");
    if (req.echo) r.Fail("resume_token_ids", "cannot be combined with echo.");
  }
  if (r.failed()) return r.error();
  return req;
}

}  // namespace tachyon::server
