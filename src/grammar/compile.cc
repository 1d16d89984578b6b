#include "grammar/compile.h"

#include <algorithm>

#include "grammar/compiled.h"
#include "grammar/gbnf.h"
#include "grammar/ir.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace tachyon::grammar {
namespace {

Status BuildChoice(const std::vector<std::string>& choices, GrammarBuilder* b, int32_t* root) {
  if (choices.empty()) return InvalidArgument("choice: at least one string is required");
  *root = b->RuleId("root");
  b->MarkDefined(*root, "choice");
  for (const std::string& c : choices) {
    Sequence seq;
    b->AppendLiteral(c, &seq);
    b->AddAlternative(*root, std::move(seq));
  }
  return OkStatus();
}

// A stable, unambiguous cache key for a spec.
std::string CacheKey(const ConstraintSpec& spec) {
  std::string key(1, static_cast<char>('0' + static_cast<int>(spec.kind)));
  key += std::to_string(spec.source.size()) + ":" + spec.source;
  for (const std::string& c : spec.choices) key += std::to_string(c.size()) + ":" + c;
  return key;
}

}  // namespace

Result<std::shared_ptr<const CompiledGrammar>> Compile(const ConstraintSpec& spec,
                                                       std::shared_ptr<const Vocabulary> vocab,
                                                       const CompileOptions& options) {
  Deadline deadline(options.budget);
  GrammarBuilder b;
  int32_t root = -1;
  switch (spec.kind) {
    case ConstraintSpec::Kind::kGbnf:
      RETURN_IF_ERROR(ParseGbnf(spec.source, &b, &root, deadline));
      break;
    case ConstraintSpec::Kind::kChoice:
      RETURN_IF_ERROR(BuildChoice(spec.choices, &b, &root));
      break;
    case ConstraintSpec::Kind::kRegex:
      RETURN_IF_ERROR(ParseRegex(spec.source, &b, &root, deadline));
      break;
    case ConstraintSpec::Kind::kJsonSchema:
    case ConstraintSpec::Kind::kJsonObject: {
      JsonSchemaOptions jo;
      jo.max_whitespace = options.max_whitespace;
      jo.deadline = std::chrono::steady_clock::now() + options.budget;
      std::string gbnf;
      if (spec.kind == ConstraintSpec::Kind::kJsonObject) {
        gbnf = JsonObjectGbnf(jo);
      } else {
        ASSIGN_OR_RETURN(gbnf, JsonSchemaToGbnf(spec.source, jo));
      }
      RETURN_IF_ERROR(ParseGbnf(gbnf, &b, &root, deadline));
      break;
    }
  }
  Result<FlatGrammar> flat = b.Finish(root, deadline);
  if (!flat.ok()) return flat.status();
  if (deadline.Expired()) return deadline.Error();
  return std::shared_ptr<const CompiledGrammar>(
      std::make_shared<GrammarImpl>(std::move(flat).value(), std::move(vocab)));
}

GrammarCache::GrammarCache(std::shared_ptr<const Vocabulary> vocab, size_t capacity,
                           CompileOptions options, size_t max_bytes)
    : vocab_(std::move(vocab)),
      capacity_(capacity < 1 ? 1 : capacity),
      options_(options),
      max_bytes_(max_bytes) {}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::Get(const ConstraintSpec& spec) {
  std::string key = CacheKey(spec);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  Result<std::shared_ptr<const CompiledGrammar>> g = Compile(spec, vocab_, options_);
  if (!g.ok()) return g;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  lru_.emplace_front(key, *g);
  index_[std::move(key)] = lru_.begin();
  size_t held = 0;  // what the entries hold now
  for (const Entry& e : lru_) held += e.second->MemoryBytes();
  while (lru_.size() > capacity_ || (lru_.size() > 1 && held > max_bytes_)) {
    held -= std::min(held, lru_.back().second->MemoryBytes());
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return g;
}

}  // namespace tachyon::grammar
