// The pooling endpoints of OpenAiApi (see api.h): /v1/embeddings (OpenAI's shape), /v1/rerank
// (Cohere / Jina's) and /v1/score (vLLM's), over GenerationBackend::TokenizeForPooling and
// SubmitPooling. Every input of a request is submitted at once, so the pooling engine batches
// them (and other requests' inputs) into shared steps; the answer is built on the
// connection's executor once the last result is in, never on the engine thread.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>

#include "server/api.h"
#include "server/json_limits.h"
#include "server/protocol.h"
#include "util/base64.h"

namespace tachyon::server {

using nlohmann::json;

namespace {

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit on inputs per embeddings request

HttpResponse Json200(const json& body) {
  HttpResponse r;
  r.body = DumpJson(body);
  return r;
}

// The little-endian float32 bytes of v, base64 (OpenAI's encoding_format "base64").
std::string Base64Floats(const std::vector<float>& v) {
  std::string bytes(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((u >> (8 * b)) & 0xff);
  }
  return util::Base64Encode(bytes);
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

// A cross-encoder's relevance in [0, 1]: sigmoid of a single logit, else the softmax
// probability of the last label.
double Relevance(const std::vector<float>& logits) {
  if (logits.size() == 1) return 1.0 / (1.0 + std::exp(-double(logits[0])));
  double mx = *std::max_element(logits.begin(), logits.end()), sum = 0;
  for (float l : logits) sum += std::exp(double(l) - mx);
  return std::exp(double(logits.back()) - mx) / sum;
}

ApiError NotThisModel(const std::string& what) {
  ApiError e = InvalidParam("model", what);
  e.code = "model_does_not_support_endpoint";
  return e;
}

// Fields a pooling request may carry; anything else is refused (400 naming it).
std::optional<ApiError> CheckFields(const json& b, std::initializer_list<const char*> allowed) {
  for (const auto& item : b.items()) {
    const std::string& key = item.key();  // a named reference: lambdas may not capture bindings
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; }) ==
        allowed.end()) {
      return InvalidParam(key, "'" + key + "' is not supported by this endpoint.");
    }
  }
  return std::nullopt;
}

// One text or document: a string, or {"text": string} (Cohere / Jina documents).
std::optional<std::string> TextOf(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("text") && v["text"].is_string())
    return v["text"].get<std::string>();
  return std::nullopt;
}

// A string or a non-empty array of strings (score's text_1 / text_2).
ApiResult<std::vector<std::string>> Texts(const json& b, const char* field) {
  auto it = b.find(field);
  if (it == b.end() || it->is_null()) {
    return InvalidParam(field, std::string("'") + field + "' is required.");
  }
  std::vector<std::string> out;
  if (it->is_string()) {
    out.push_back(it->get<std::string>());
  } else if (it->is_array() && !it->empty() && it->size() <= kMaxInputs) {
    for (const json& t : *it) {
      if (!t.is_string()) break;
      out.push_back(t.get<std::string>());
    }
    if (out.size() != it->size()) out.clear();
  }
  if (out.empty()) {
    return InvalidParam(field, std::string("'") + field + "' must be a string or a list of 1 to " +
                                   std::to_string(kMaxInputs) + " strings.");
  }
  return out;
}

}  // namespace

void OpenAiApi::RunPooling(std::vector<engine::PoolingRequest> inputs,
                           std::shared_ptr<ResponseChannel> channel, const std::string& endpoint,
                           PoolingFinish finish) {
  struct Shared {
    std::mutex mu;
    std::vector<engine::PoolingResult> results;
    Status error;  // the first failure
    std::atomic<size_t> remaining{0};
  };
  auto shared = std::make_shared<Shared>();
  const size_t n = inputs.size();
  shared->results.resize(n);
  shared->remaining = n + 1;  // + 1 for the submitting loop
  auto done = [this, shared, channel, endpoint, finish] {
    channel->Post([this, shared, channel, endpoint, finish] {
      if (!shared->error.ok())
        return SendError(*channel, ApiErrorFromStatus(shared->error), endpoint);
      int64_t tokens = 0;
      for (const auto& r : shared->results) tokens += r.n_tokens;
      metrics_->CountRequest(endpoint, 200);
      channel->Respond(Json200(finish(shared->results, tokens)));
    });
  };
  for (size_t i = 0; i < n; ++i) {
    Status st =
        backend_->SubmitPooling(std::move(inputs[i]), [shared, i, done](engine::PoolingResult r) {
          {
            std::lock_guard<std::mutex> lock(shared->mu);
            if (!r.status.ok() && shared->error.ok()) shared->error = r.status;
            shared->results[i] = std::move(r);
          }
          if (shared->remaining.fetch_sub(1) == 1) done();
        });
    if (!st.ok()) {
      {
        std::lock_guard<std::mutex> lock(shared->mu);
        if (shared->error.ok()) shared->error = st;
      }
      // The rest are not submitted; count them (and this one) as done.
      const size_t skipped = n - i;
      if (shared->remaining.fetch_sub(skipped) == skipped) done();
      break;
    }
  }
  if (shared->remaining.fetch_sub(1) == 1) done();
}

void OpenAiApi::Embeddings(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel) {
  const std::string ep = "/v1/embeddings";
  const ModelInfo& info = backend_->Info();
  if (info.embedding_dim <= 0) {
    return SendError(
        *channel,
        NotThisModel(info.generates
                         ? "This model generates text; it serves no embeddings (serve an "
                           "embedding model, or a decoder with --pooling)."
                         : "This model is a reranker; use /v1/rerank or /v1/score."),
        ep);
  }
  auto body = ParseJsonBody(req.body);
  if (!body.ok()) return SendError(*channel, body.error(), ep);
  const json& b = body.value();
  if (auto e = CheckFields(b, {"input", "model", "encoding_format", "dimensions", "user"})) {
    return SendError(*channel, *e, ep);
  }
  if (b.contains("model") && !b["model"].is_null()) {
    if (!b["model"].is_string())
      return SendError(*channel, InvalidParam("model", "'model' must be a string."), ep);
    if (auto e = CheckModel(b["model"].get<std::string>())) return SendError(*channel, *e, ep);
  }
  bool base64 = false;
  if (auto it = b.find("encoding_format"); it != b.end() && !it->is_null()) {
    if (*it != "float" && *it != "base64") {
      return SendError(
          *channel,
          InvalidParam("encoding_format", "'encoding_format' must be 'float' or 'base64'."), ep);
    }
    base64 = *it == "base64";
  }
  int64_t dims = info.embedding_dim;
  if (auto it = b.find("dimensions"); it != b.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 ||
        it->get<int64_t>() > info.embedding_dim) {
      return SendError(*channel,
                       InvalidParam("dimensions", "'dimensions' must be an integer in [1, " +
                                                      std::to_string(info.embedding_dim) + "]."),
                       ep);
    }
    dims = it->get<int64_t>();
    if (dims != info.embedding_dim && !info.normalized) {
      return SendError(*channel,
                       InvalidParam("dimensions",
                                    "This model's embeddings are not normalised, so "
                                    "they cannot be shortened."),
                       ep);
    }
  }
  // input: a string, a list of strings, a list of token ids, or a list of lists of ids.
  auto it = b.find("input");
  std::vector<engine::PoolingRequest> inputs;
  const std::string shape_msg =
      "'input' must be a non-empty string, a list of 1 to " + std::to_string(kMaxInputs) +
      " non-empty strings, a list of token ids, or a list of lists of token ids.";
  auto ids_of = [&](const json& arr) -> ApiResult<engine::PoolingRequest> {
    engine::PoolingRequest r;
    if (!arr.is_array() || arr.empty()) return InvalidParam("input", shape_msg);
    if (static_cast<int64_t>(arr.size()) > info.context_length) {
      return InvalidParam("input", "An input has " + std::to_string(arr.size()) +
                                       " tokens; this model takes at most " +
                                       std::to_string(info.context_length) + ".");
    }
    for (const json& t : arr) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= info.vocab_size) {
        return InvalidParam(
            "input", "Token ids must be integers in [0, " + std::to_string(info.vocab_size) + ").");
      }
      r.tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return r;
  };
  auto text_of = [&](const json& s) -> ApiResult<engine::PoolingRequest> {
    if (!s.is_string() || s.get_ref<const std::string&>().empty()) {
      return InvalidParam("input", shape_msg);
    }
    auto r = backend_->TokenizeForPooling(s.get_ref<const std::string&>(), nullptr);
    if (!r.ok()) return ApiErrorFromStatus(r.status());
    return std::move(*r);
  };
  std::optional<ApiError> error;
  auto add = [&](ApiResult<engine::PoolingRequest> r) {
    if (!r.ok()) {
      if (!error) error = r.error();
      return;
    }
    inputs.push_back(std::move(r.value()));
  };
  if (it == b.end() || it->is_null()) {
    error = InvalidParam("input", "'input' is required.");
  } else if (it->is_string()) {
    add(text_of(*it));
  } else if (!it->is_array() || it->empty() || it->size() > kMaxInputs) {
    error = InvalidParam("input", shape_msg);
  } else if ((*it)[0].is_number()) {
    add(ids_of(*it));
  } else {
    for (const json& one : *it) {
      if (error) break;
      add(one.is_array() ? ids_of(one) : text_of(one));
    }
  }
  if (error) return SendError(*channel, *error, ep);
  const std::string model = model_name();
  const bool renorm = dims != info.embedding_dim;
  RunPooling(std::move(inputs), channel, ep,
             [model, dims, renorm, base64](std::vector<engine::PoolingResult>& rs, int64_t tokens) {
               json data = json::array();
               for (size_t i = 0; i < rs.size(); ++i) {
                 std::vector<float>& v = rs[i].values;
                 v.resize(static_cast<size_t>(dims));
                 if (renorm) {  // truncated (Matryoshka style): unit length again
                   double ss = 0;
                   for (float x : v) ss += double(x) * x;
                   const float inv = static_cast<float>(1.0 / std::max(std::sqrt(ss), 1e-12));
                   for (float& x : v) x *= inv;
                 }
                 json e = {{"object", "embedding"}, {"index", i}};
                 if (base64) {
                   e["embedding"] = Base64Floats(v);
                 } else {
                   e["embedding"] = v;
                 }
                 data.push_back(std::move(e));
               }
               return json{{"object", "list"},
                           {"data", std::move(data)},
                           {"model", model},
                           {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
             });
}

// Relevance of each pair (queries[i or 0], docs[i]): a cross-encoder scores the pair; an
// embedding model embeds every text and compares by cosine. `done(scores, tokens)`.
void OpenAiApi::ScorePairs(const std::vector<std::string>& queries,
                           const std::vector<std::string>& docs,
                           std::shared_ptr<ResponseChannel> channel, const std::string& endpoint,
                           std::function<json(const std::vector<double>&, int64_t)> done) {
  const ModelInfo& info = backend_->Info();
  std::vector<engine::PoolingRequest> inputs;
  auto tokenize = [&](const std::string& a, const std::string* pair) -> bool {
    std::string_view pv = pair ? std::string_view(*pair) : std::string_view();
    auto r = backend_->TokenizeForPooling(a, pair ? &pv : nullptr);
    if (!r.ok()) {
      SendError(*channel, ApiErrorFromStatus(r.status()), endpoint);
      return false;
    }
    inputs.push_back(std::move(*r));
    return true;
  };
  const size_t n = docs.size();
  if (info.reranker) {
    for (size_t i = 0; i < n; ++i) {
      if (!tokenize(queries[queries.size() == 1 ? 0 : i], &docs[i])) return;
    }
    RunPooling(std::move(inputs), channel, endpoint,
               [done](std::vector<engine::PoolingResult>& rs, int64_t tokens) {
                 std::vector<double> scores;
                 for (const auto& r : rs) scores.push_back(Relevance(r.values));
                 return done(scores, tokens);
               });
    return;
  }
  for (const std::string& q : queries) {
    if (!tokenize(q, nullptr)) return;
  }
  for (const std::string& d : docs) {
    if (!tokenize(d, nullptr)) return;
  }
  const size_t nq = queries.size();
  RunPooling(std::move(inputs), channel, endpoint,
             [done, nq, n](std::vector<engine::PoolingResult>& rs, int64_t tokens) {
               std::vector<double> scores;
               for (size_t i = 0; i < n; ++i) {
                 scores.push_back(Cosine(rs[nq == 1 ? 0 : i].values, rs[nq + i].values));
               }
               return done(scores, tokens);
             });
}

void OpenAiApi::Rerank(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel) {
  const std::string ep = "/v1/rerank";
  if (backend_->Info().generates) {
    return SendError(*channel, NotThisModel("This model generates text; it cannot rerank."), ep);
  }
  auto body = ParseJsonBody(req.body);
  if (!body.ok()) return SendError(*channel, body.error(), ep);
  const json& b = body.value();
  if (auto e = CheckFields(b, {"model", "query", "documents", "top_n", "return_documents",
                               "max_chunks_per_doc", "user"})) {
    return SendError(*channel, *e, ep);
  }
  if (b.contains("model") && !b["model"].is_null()) {
    if (!b["model"].is_string())
      return SendError(*channel, InvalidParam("model", "'model' must be a string."), ep);
    if (auto e = CheckModel(b["model"].get<std::string>())) return SendError(*channel, *e, ep);
  }
  auto q = b.find("query");
  if (q == b.end() || !q->is_string() || q->get_ref<const std::string&>().empty()) {
    return SendError(*channel, InvalidParam("query", "'query' must be a non-empty string."), ep);
  }
  auto d = b.find("documents");
  std::vector<std::string> docs;
  if (d != b.end() && d->is_array() && !d->empty() && d->size() <= kMaxInputs) {
    for (const json& x : *d) {
      std::optional<std::string> t = TextOf(x);
      if (!t) break;
      docs.push_back(std::move(*t));
    }
  }
  if (docs.empty() || docs.size() != d->size()) {
    return SendError(*channel,
                     InvalidParam("documents", "'documents' must be a list of 1 to " +
                                                   std::to_string(kMaxInputs) +
                                                   " strings or {\"text\": string} objects."),
                     ep);
  }
  size_t top_n = docs.size();
  if (auto t = b.find("top_n"); t != b.end() && !t->is_null()) {
    if (!t->is_number_integer() || t->get<int64_t>() < 1) {
      return SendError(*channel, InvalidParam("top_n", "'top_n' must be a positive integer."), ep);
    }
    top_n = std::min<size_t>(top_n, t->get<int64_t>());
  }
  bool return_documents = true;
  if (auto r = b.find("return_documents"); r != b.end() && !r->is_null()) {
    if (!r->is_boolean()) {
      return SendError(
          *channel, InvalidParam("return_documents", "'return_documents' must be a boolean."), ep);
    }
    return_documents = r->get<bool>();
  }
  const std::string id = NewId("rerank"), model = model_name();
  ScorePairs(
      {q->get<std::string>()}, docs, channel, ep,
      [docs, top_n, return_documents, id, model](const std::vector<double>& s, int64_t tokens) {
        std::vector<size_t> order(s.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return s[a] > s[b]; });
        json results = json::array();
        for (size_t k = 0; k < top_n; ++k) {
          json r = {{"index", order[k]}, {"relevance_score", s[order[k]]}};
          if (return_documents) r["document"] = {{"text", docs[order[k]]}};
          results.push_back(std::move(r));
        }
        return json{{"id", id},
                    {"model", model},
                    {"results", std::move(results)},
                    {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
      });
}

void OpenAiApi::Score(const HttpRequest& req, std::shared_ptr<ResponseChannel> channel) {
  const std::string ep = "/v1/score";
  if (backend_->Info().generates) {
    return SendError(*channel, NotThisModel("This model generates text; it cannot score."), ep);
  }
  auto body = ParseJsonBody(req.body);
  if (!body.ok()) return SendError(*channel, body.error(), ep);
  const json& b = body.value();
  if (auto e = CheckFields(b, {"model", "text_1", "text_2", "user"}))
    return SendError(*channel, *e, ep);
  if (b.contains("model") && !b["model"].is_null()) {
    if (!b["model"].is_string())
      return SendError(*channel, InvalidParam("model", "'model' must be a string."), ep);
    if (auto e = CheckModel(b["model"].get<std::string>())) return SendError(*channel, *e, ep);
  }
  auto t1 = Texts(b, "text_1");
  if (!t1.ok()) return SendError(*channel, t1.error(), ep);
  auto t2 = Texts(b, "text_2");
  if (!t2.ok()) return SendError(*channel, t2.error(), ep);
  if (t1.value().size() != 1 && t1.value().size() != t2.value().size()) {
    return SendError(*channel,
                     InvalidParam("text_2", "text_1 must be one text or as many as text_2 (" +
                                                std::to_string(t2.value().size()) + ")."),
                     ep);
  }
  const std::string id = NewId("score"), model = model_name();
  const int64_t created = created_;
  ScorePairs(t1.value(), t2.value(), channel, ep,
             [id, model, created](const std::vector<double>& s, int64_t tokens) {
               json data = json::array();
               for (size_t i = 0; i < s.size(); ++i) {
                 data.push_back({{"index", i}, {"object", "score"}, {"score", s[i]}});
               }
               return json{{"id", id},
                           {"object", "list"},
                           {"created", created},
                           {"model", model},
                           {"data", std::move(data)},
                           {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
             });
}

}  // namespace tachyon::server
