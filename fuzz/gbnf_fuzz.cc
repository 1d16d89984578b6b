// libFuzzer target: arbitrary bytes as a GBNF grammar (first byte 'R': the rest as a regex),
// compiled over a small multi-byte vocabulary under a short compile budget, then a short walk
// (masks, accepting masked tokens, rollback) with every mask token checked by AcceptToken. Any
// crash, sanitizer report, hang or runaway allocation is a bug: bad grammars must fail with a
// Status.
//
//   scripts/fuzz.sh 120 gbnf_fuzz
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "grammar/compile.h"

namespace {

using namespace tachyon::grammar;

std::shared_ptr<const Vocabulary> Vocab() {
  static const auto* v = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
    for (const char* s : {"ab", "abc", "\"a", "a\"", "{\"", "\":", "12", "é", "\xC3", "日本", "  ",
                          "\n", "true", "null", "[]", "{}", "xyz", "\\u"}) {
      t.push_back(s);
    }
    t.push_back("");  // EOS
    const auto eos = static_cast<int32_t>(t.size() - 1);
    return new std::shared_ptr<const Vocabulary>(*Vocabulary::FromTokenBytes(std::move(t), {eos}));
  }();
  return *v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  ConstraintSpec spec;
  if (!text.empty() && text[0] == 'R') {
    spec.kind = ConstraintSpec::Kind::kRegex;
    text.erase(0, 1);
  }
  spec.source = std::move(text);
  CompileOptions options;
  options.budget = std::chrono::microseconds(200'000);
  auto g = Compile(spec, Vocab(), options);
  if (!g.ok()) {
    if (g.status().message().empty()) std::abort();
    return 0;
  }
  const auto& vocab = *Vocab();
  auto m = (*g)->NewMatcher();
  std::vector<uint32_t> mask(vocab.mask_words());
  uint32_t pick = static_cast<uint32_t>(size) * 2654435761u;
  int accepted = 0;
  for (int step = 0; step < 12; ++step) {
    m->FillNextTokenBitmask(mask);
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < vocab.size(); ++t) {
      if ((mask[t >> 5] >> (t & 31)) & 1u) allowed.push_back(t);
    }
    if (allowed.empty()) break;
    pick = pick * 1103515245u + 12345u;
    const int32_t t = allowed[pick % allowed.size()];
    if (!m->AcceptToken(t)) std::abort();  // the mask allowed it
    ++accepted;
    if (step % 5 == 4) {
      m->Rollback(1);
      --accepted;
    }
  }
  m->Rollback(accepted);
  return 0;
}
