// Compile(): a ConstraintSpec to a CompiledGrammar for one Vocabulary; GrammarCache: a bounded,
// thread-safe LRU of compiled grammars.
//
// Errors are InvalidArgument naming the problem: a GBNF syntax error with line:col, a regex
// feature that is not supported, an unsupported JSON Schema keyword, or the compile budget
// exceeded. A spec is never compiled to a silently looser grammar.
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/grammar.h"
#include "grammar/vocabulary.h"
#include "util/status.h"

namespace tachyon::grammar {

struct CompileOptions {
  // Wall-clock limit of one compilation, checked periodically while it runs; beyond it
  // Compile() returns InvalidArgument ("... compile budget ...").
  std::chrono::microseconds budget{100'000};
  // JSON (kJsonObject / kJsonSchema): the longest whitespace run allowed between tokens.
  int max_whitespace = 2;
};

// REQUIRES: vocab != nullptr. Thread-safe.
Result<std::shared_ptr<const CompiledGrammar>> Compile(const ConstraintSpec& spec,
                                                       std::shared_ptr<const Vocabulary> vocab,
                                                       const CompileOptions& options = {});

// Bounded LRU of compiled grammars keyed by the spec, for one vocabulary: at most `capacity`
// of them, and, when one is added, the least recently used go (all but the new one at most)
// until they hold at most `max_bytes` together (CompiledGrammar::MemoryBytes: a grammar's
// caches grow as matchers walk it, each bounded, to ~90 MiB in all). Thread-safe. Errors are not
// cached. Two threads asking for the same uncached spec may both compile it.
inline constexpr size_t kGrammarCacheMaxBytes = size_t{1} << 30;
class GrammarCache {
 public:
  // REQUIRES: vocab != nullptr, capacity >= 1.
  GrammarCache(std::shared_ptr<const Vocabulary> vocab, size_t capacity,
               CompileOptions options = {}, size_t max_bytes = kGrammarCacheMaxBytes);

  Result<std::shared_ptr<const CompiledGrammar>> Get(const ConstraintSpec& spec);

  const std::shared_ptr<const Vocabulary>& vocab() const { return vocab_; }
  size_t size() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledGrammar>>;
  const std::shared_ptr<const Vocabulary> vocab_;
  const size_t capacity_;
  const CompileOptions options_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // GUARDED_BY(mu_); most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;  // GUARDED_BY(mu_)
};

}  // namespace tachyon::grammar
