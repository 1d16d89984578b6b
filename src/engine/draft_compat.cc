#include "engine/draft_compat.h"

#include <string>
#include <vector>

namespace tachyon::engine {
namespace {

Status Mismatch(const std::string& what) {
  return InvalidArgument("the draft model does not share the target's tokenizer: " + what);
}

// Printable and short: a token text in quotes, control bytes escaped.
std::string Quote(std::string_view text) {
  std::string out = "'";
  for (char c : text.substr(0, 40)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out + (text.size() > 40 ? "...'" : "'");
}

std::string Ids(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

}  // namespace

Status CheckDraftVocabulary(const tokenizer::Tokenizer& target, int64_t target_rows,
                            const tokenizer::Tokenizer& draft, int64_t draft_rows) {
  if (target.vocab_size() != draft.vocab_size()) {
    return Mismatch("its vocabulary has " + std::to_string(draft.vocab_size()) +
                    " tokens, the target's " + std::to_string(target.vocab_size()));
  }
  if (target.kind() != draft.kind()) {
    return Mismatch("it is a " + std::string(draft.kind()) + " tokenizer, the target's a " +
                    std::string(target.kind()));
  }
  for (int32_t id = 0; id < target.vocab_size(); ++id) {
    if (target.TokenText(id) != draft.TokenText(id)) {
      return Mismatch("token " + std::to_string(id) + " is " + Quote(target.TokenText(id)) +
                      " in the target and " + Quote(draft.TokenText(id)) + " in the draft model");
    }
    if (target.token_type(id) != draft.token_type(id)) {
      return Mismatch("token " + std::to_string(id) + " (" + Quote(target.TokenText(id)) +
                      ") has type " + std::to_string(static_cast<int>(draft.token_type(id))) +
                      " in the draft model and " +
                      std::to_string(static_cast<int>(target.token_type(id))) + " in the target");
    }
  }
  const struct {
    const char* name;
    int32_t t, d;
  } specials[] = {{"BOS", target.bos_id(), draft.bos_id()},
                  {"EOS", target.eos_id(), draft.eos_id()},
                  {"EOT", target.eot_id(), draft.eot_id()},
                  {"padding", target.pad_id(), draft.pad_id()},
                  {"unknown", target.unk_id(), draft.unk_id()}};
  for (const auto& s : specials) {
    if (s.t != s.d) {
      return Mismatch(std::string("its ") + s.name + " id is " + std::to_string(s.d) +
                      ", the target's " + std::to_string(s.t));
    }
  }
  if (target.add_bos() != draft.add_bos() || target.add_eos() != draft.add_eos()) {
    return Mismatch("it adds BOS / EOS differently from the target");
  }
  if (target.EogIds() != draft.EogIds()) {
    return Mismatch("its end-of-generation ids are " + Ids(draft.EogIds()) + ", the target's " +
                    Ids(target.EogIds()));
  }
  if (target_rows != draft_rows) {
    return Mismatch("the draft model scores " + std::to_string(draft_rows) +
                    " tokens, the target " + std::to_string(target_rows));
  }
  return OkStatus();
}

}  // namespace tachyon::engine
