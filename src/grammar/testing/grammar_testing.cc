#include "grammar/testing/grammar_testing.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "tokenizer/tokenizer.h"
#include "util/testing/testdata.h"

namespace tachyon::grammar::testing {

std::shared_ptr<const Vocabulary> ByteVocab() {
  static const std::shared_ptr<const Vocabulary> vocab = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
    return MakeVocab(t);
  }();
  return vocab;
}

std::shared_ptr<const Vocabulary> MakeVocab(const std::vector<std::string>& tokens) {
  std::vector<std::string> t = tokens;
  t.push_back("");
  auto v = Vocabulary::FromTokenBytes(std::move(t), {static_cast<int32_t>(tokens.size())});
  return v.ok() ? *v : nullptr;
}

std::shared_ptr<const CompiledGrammar> CompileGbnf(const std::string& gbnf,
                                                   std::shared_ptr<const Vocabulary> vocab) {
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::kGbnf;
  spec.source = gbnf;
  auto g = Compile(spec, vocab ? vocab : ByteVocab());
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << gbnf;
  return g.ok() ? *g : nullptr;
}

bool MatchesBytes(const CompiledGrammar& g, const std::string& text) {
  auto m = g.NewMatcher();
  for (char c : text) {
    if (!m->AcceptToken(static_cast<uint8_t>(c))) return false;
  }
  return m->CanTerminate();
}

std::vector<uint32_t> BruteForceMask(TokenMatcher& m, const Vocabulary& vocab) {
  std::vector<uint32_t> mask(vocab.mask_words(), 0);
  for (int32_t t = 0; t < vocab.size(); ++t) {
    if (m.AcceptToken(t)) {
      mask[t >> 5] |= 1u << (t & 31);
      m.Rollback(1);
    }
  }
  return mask;
}

std::shared_ptr<const Vocabulary> TestdataVocab(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Vocabulary>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(name); it != cache.end()) return it->second;
  const std::string dir = TestdataDir();
  std::shared_ptr<const Vocabulary> v;
  if (!dir.empty()) {
    auto tok = tokenizer::Tokenizer::FromFile(dir + "/tokenizers/" + name);
    EXPECT_TRUE(tok.ok()) << tok.status().ToString();
    if (tok.ok()) {
      auto vocab = Vocabulary::FromTokenizer(**tok, (*tok)->EogIds());
      EXPECT_TRUE(vocab.ok()) << vocab.status().ToString();
      if (vocab.ok()) v = *vocab;
    }
  }
  cache[name] = v;
  return v;
}

}  // namespace tachyon::grammar::testing
