// tokenizer.json -> Pipeline. Every component is checked; anything unsupported is an
// Unimplemented error naming the component and the field path.
#include "tokenizer/hf_loader.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tokenizer/bpe.h"
#include "util/json_text.h"

namespace tachyon::tokenizer {
namespace {

using json = nlohmann::json;

constexpr int64_t kMaxVocab = 16 * 1024 * 1024;

class Loader {
 public:
  explicit Loader(std::string name) : name_(std::move(name)) {}

  Status Err(const std::string& path, const std::string& msg) const {
    return InvalidArgument(name_ + ": " + path + ": " + msg);
  }
  Status Unsupported(const std::string& path, const std::string& what) const {
    return Unimplemented(name_ + ": " + path + ": " + what + " is not supported");
  }

  Result<std::string> Str(const json& obj, const char* key, const std::string& path,
                          std::optional<std::string> def = std::nullopt) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
      if (def) return *def;
      return Err(path + "." + key, "missing");
    }
    if (!it->is_string()) return Err(path + "." + key, "expected a string");
    return it->get<std::string>();
  }
  Result<bool> Bool(const json& obj, const char* key, const std::string& path, bool def) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    if (!it->is_boolean()) return Err(path + "." + key, "expected a boolean");
    return it->get<bool>();
  }
  Result<int64_t> Int(const json& obj, const char* key, const std::string& path,
                      int64_t def) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    if (!it->is_number_integer()) return Err(path + "." + key, "expected an integer");
    return it->get<int64_t>();
  }

  // {"String": s} or {"Regex": r} -> a compiled regex (literal strings escaped).
  Result<std::shared_ptr<Regex>> Pattern(const json& obj, const std::string& path,
                                         std::string* literal = nullptr) const {
    auto it = obj.find("pattern");
    if (it == obj.end() || !it->is_object()) return Err(path + ".pattern", "missing");
    std::string re;
    if (it->contains("String") && (*it)["String"].is_string()) {
      const std::string s = (*it)["String"].get<std::string>();
      if (literal != nullptr) *literal = s;
      for (char c : s) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && static_cast<uint8_t>(c) < 0x80) {
          re.push_back('\\');
        }
        re.push_back(c);
      }
    } else if (it->contains("Regex") && (*it)["Regex"].is_string()) {
      re = (*it)["Regex"].get<std::string>();
    } else {
      return Err(path + ".pattern", "expected {\"String\": ...} or {\"Regex\": ...}");
    }
    auto compiled = Regex::Compile(re);
    if (!compiled.ok()) return compiled.status().WithContext(name_ + ": " + path);
    return std::shared_ptr<Regex>(std::move(compiled).value());
  }

  Result<SplitBehavior> Behavior(const json& obj, const std::string& path) const {
    ASSIGN_OR_RETURN(std::string b, Str(obj, "behavior", path, "Isolated"));
    if (b == "Removed") return SplitBehavior::kRemoved;
    if (b == "Isolated") return SplitBehavior::kIsolated;
    if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
    if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
    if (b == "Contiguous") return SplitBehavior::kContiguous;
    return Err(path + ".behavior", "unknown split behavior '" + b + "'");
  }

  Status Normalizer(const json& n, const std::string& path, std::vector<NormStep>* out) const {
    if (n.is_null()) return OkStatus();
    if (!n.is_object()) return Err(path, "expected an object");
    ASSIGN_OR_RETURN(std::string type, Str(n, "type", path));
    NormStep s{};
    if (type == "Sequence") {
      auto it = n.find("normalizers");
      if (it == n.end() || !it->is_array()) return Err(path + ".normalizers", "missing");
      for (size_t i = 0; i < it->size(); ++i) {
        RETURN_IF_ERROR(Normalizer((*it)[i], path + ".normalizers[" + std::to_string(i) + "]", out));
      }
      return OkStatus();
    } else if (type == "NFC") {
      s.kind = NormStep::kNfc;
    } else if (type == "NFKC") {
      s.kind = NormStep::kNfkc;
    } else if (type == "NFD") {
      s.kind = NormStep::kNfd;
    } else if (type == "NFKD") {
      s.kind = NormStep::kNfkd;
    } else if (type == "Lowercase") {
      s.kind = NormStep::kLowercase;
    } else if (type == "StripAccents") {
      s.kind = NormStep::kStripAccents;
    } else if (type == "Replace") {
      s.kind = NormStep::kReplace;
      std::string literal;
      ASSIGN_OR_RETURN(auto re, Pattern(n, path, &literal));
      if (literal.empty()) s.regex = re;
      s.pattern = literal;
      ASSIGN_OR_RETURN(s.content, Str(n, "content", path));
    } else if (type == "Prepend") {
      s.kind = NormStep::kPrepend;
      ASSIGN_OR_RETURN(s.content, Str(n, "prepend", path));
    } else if (type == "Strip") {
      s.kind = NormStep::kStrip;
      ASSIGN_OR_RETURN(s.left, Bool(n, "strip_left", path, true));
      ASSIGN_OR_RETURN(s.right, Bool(n, "strip_right", path, true));
    } else if (type == "BertNormalizer") {
      s.kind = NormStep::kBert;
      ASSIGN_OR_RETURN(s.clean_text, Bool(n, "clean_text", path, true));
      ASSIGN_OR_RETURN(s.chinese, Bool(n, "handle_chinese_chars", path, true));
      ASSIGN_OR_RETURN(s.lowercase, Bool(n, "lowercase", path, true));
      ASSIGN_OR_RETURN(s.strip_accents, Bool(n, "strip_accents", path, s.lowercase));
    } else {
      return Unsupported(path, "normalizer '" + type + "'");
    }
    out->push_back(std::move(s));
    return OkStatus();
  }

  Status PreTokenizer(const json& n, const std::string& path, std::vector<PreStep>* out) const {
    if (n.is_null()) return OkStatus();
    if (!n.is_object()) return Err(path, "expected an object");
    ASSIGN_OR_RETURN(std::string type, Str(n, "type", path));
    PreStep s{};
    if (type == "Sequence") {
      auto it = n.find("pretokenizers");
      if (it == n.end() || !it->is_array()) return Err(path + ".pretokenizers", "missing");
      for (size_t i = 0; i < it->size(); ++i) {
        RETURN_IF_ERROR(
            PreTokenizer((*it)[i], path + ".pretokenizers[" + std::to_string(i) + "]", out));
      }
      return OkStatus();
    } else if (type == "Split") {
      s.kind = PreStep::kSplit;
      ASSIGN_OR_RETURN(s.regex, Pattern(n, path));
      ASSIGN_OR_RETURN(s.behavior, Behavior(n, path));
      ASSIGN_OR_RETURN(s.invert, Bool(n, "invert", path, false));
    } else if (type == "ByteLevel") {
      s.kind = PreStep::kByteLevel;
      ASSIGN_OR_RETURN(s.add_prefix_space, Bool(n, "add_prefix_space", path, true));
      ASSIGN_OR_RETURN(bool use_regex, Bool(n, "use_regex", path, true));
      if (use_regex) {
        auto re = Regex::Compile(kGpt2Pattern);
        if (!re.ok()) return re.status();
        s.regex = std::shared_ptr<Regex>(std::move(re).value());
      }
    } else if (type == "Metaspace") {
      s.kind = PreStep::kMetaspace;
      RETURN_IF_ERROR(Metaspace(n, path, &s.replacement, &s.prepend, &s.split));
    } else if (type == "Digits") {
      s.kind = PreStep::kDigits;
      ASSIGN_OR_RETURN(s.individual_digits, Bool(n, "individual_digits", path, false));
    } else if (type == "Punctuation") {
      s.kind = PreStep::kPunctuation;
      ASSIGN_OR_RETURN(s.behavior, Behavior(n, path));
    } else if (type == "Whitespace") {
      s.kind = PreStep::kWhitespace;
      auto re = Regex::Compile("\\w+|[^\\w\\s]+");
      if (!re.ok()) return re.status();
      s.regex = std::shared_ptr<Regex>(std::move(re).value());
    } else if (type == "WhitespaceSplit") {
      s.kind = PreStep::kWhitespaceSplit;
    } else if (type == "BertPreTokenizer") {
      s.kind = PreStep::kBert;
    } else if (type == "CharDelimiterSplit") {
      s.kind = PreStep::kCharDelimiter;
      ASSIGN_OR_RETURN(s.replacement, Str(n, "delimiter", path));
    } else {
      return Unsupported(path, "pre-tokenizer '" + type + "'");
    }
    if (!out->empty() && out->back().kind == PreStep::kByteLevel) {
      return Unsupported(path, "a pre-tokenizer after ByteLevel");
    }
    out->push_back(std::move(s));
    return OkStatus();
  }

  Status Metaspace(const json& n, const std::string& path, std::string* replacement,
                   PreStep::Prepend* prepend, bool* split) const {
    ASSIGN_OR_RETURN(*replacement, Str(n, "replacement", path, "\xE2\x96\x81"));
    ASSIGN_OR_RETURN(*split, Bool(n, "split", path, true));
    if (n.contains("prepend_scheme") && n["prepend_scheme"].is_string()) {
      const std::string p = n["prepend_scheme"].get<std::string>();
      if (p == "always") {
        *prepend = PreStep::kAlways;
      } else if (p == "first") {
        *prepend = PreStep::kFirst;
      } else if (p == "never") {
        *prepend = PreStep::kNever;
      } else {
        return Err(path + ".prepend_scheme", "unknown value '" + p + "'");
      }
    } else {
      ASSIGN_OR_RETURN(bool add, Bool(n, "add_prefix_space", path, true));
      *prepend = add ? PreStep::kAlways : PreStep::kNever;
    }
    return OkStatus();
  }

  Status Decoder(const json& n, const std::string& path, std::vector<DecStep>* out) const {
    if (n.is_null()) return OkStatus();
    if (!n.is_object()) return Err(path, "expected an object");
    ASSIGN_OR_RETURN(std::string type, Str(n, "type", path));
    DecStep s{};
    if (type == "Sequence") {
      auto it = n.find("decoders");
      if (it == n.end() || !it->is_array()) return Err(path + ".decoders", "missing");
      for (size_t i = 0; i < it->size(); ++i) {
        RETURN_IF_ERROR(Decoder((*it)[i], path + ".decoders[" + std::to_string(i) + "]", out));
      }
      return OkStatus();
    } else if (type == "ByteLevel") {
      s.kind = DecStep::kByteLevel;
    } else if (type == "ByteFallback") {
      s.kind = DecStep::kByteFallback;
    } else if (type == "Fuse") {
      s.kind = DecStep::kFuse;
    } else if (type == "Replace") {
      s.kind = DecStep::kReplace;
      ASSIGN_OR_RETURN(auto re, Pattern(n, path, &s.pattern));
      (void)re;
      if (s.pattern.empty()) return Unsupported(path, "Replace decoder with a Regex pattern");
      ASSIGN_OR_RETURN(s.content, Str(n, "content", path));
    } else if (type == "Strip") {
      s.kind = DecStep::kStrip;
      ASSIGN_OR_RETURN(s.content, Str(n, "content", path, " "));
      ASSIGN_OR_RETURN(int64_t start, Int(n, "start", path, 0));
      ASSIGN_OR_RETURN(int64_t stop, Int(n, "stop", path, 0));
      s.start = static_cast<int>(std::clamp<int64_t>(start, 0, 1 << 20));
      s.stop = static_cast<int>(std::clamp<int64_t>(stop, 0, 1 << 20));
    } else if (type == "Metaspace") {
      s.kind = DecStep::kMetaspace;
      PreStep::Prepend prepend;
      bool split;
      RETURN_IF_ERROR(Metaspace(n, path, &s.replacement, &prepend, &split));
      s.prepend = prepend != PreStep::kNever;
    } else if (type == "WordPiece") {
      s.kind = DecStep::kWordPiece;
      ASSIGN_OR_RETURN(s.prefix, Str(n, "prefix", path, "##"));
      ASSIGN_OR_RETURN(s.cleanup, Bool(n, "cleanup", path, true));
    } else {
      return Unsupported(path, "decoder '" + type + "'");
    }
    out->push_back(std::move(s));
    return OkStatus();
  }

  // Resolves a token spelling to its id (added tokens first, then the model vocabulary).
  int32_t Id(const Pipeline& p, const std::string& text) const { return p.vocab.Find(text); }

  Status PostProcessor(const json& n, const std::string& path, Pipeline* p) const {
    if (n.is_null()) return OkStatus();
    if (!n.is_object()) return Err(path, "expected an object");
    ASSIGN_OR_RETURN(std::string type, Str(n, "type", path));
    if (type == "Sequence") {
      auto it = n.find("processors");
      if (it == n.end() || !it->is_array()) return Err(path + ".processors", "missing");
      for (size_t i = 0; i < it->size(); ++i) {
        RETURN_IF_ERROR(
            PostProcessor((*it)[i], path + ".processors[" + std::to_string(i) + "]", p));
      }
      return OkStatus();
    }
    if (type == "ByteLevel") return OkStatus();  // offsets only
    if (type == "BertProcessing" || type == "RobertaProcessing") {
      auto tok = [&](const char* key) -> Result<int32_t> {
        auto it = n.find(key);
        if (it == n.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer()) {
          return Err(path + "." + key, "expected [token, id]");
        }
        return (*it)[1].get<int32_t>();
      };
      ASSIGN_OR_RETURN(int32_t cls, tok("cls"));
      ASSIGN_OR_RETURN(int32_t sep, tok("sep"));
      p->prefix_ids.push_back(cls);
      p->suffix_ids.insert(p->suffix_ids.begin(), sep);
      return OkStatus();
    }
    if (type != "TemplateProcessing") return Unsupported(path, "post-processor '" + type + "'");
    auto single = n.find("single");
    if (single == n.end() || !single->is_array()) return Err(path + ".single", "missing");
    auto specials = n.find("special_tokens");
    bool seen_a = false;
    std::vector<int32_t> pre, post;
    for (size_t i = 0; i < single->size(); ++i) {
      const json& item = (*single)[i];
      const std::string ipath = path + ".single[" + std::to_string(i) + "]";
      if (item.contains("Sequence")) {
        seen_a = true;
        continue;
      }
      if (!item.contains("SpecialToken") || !item["SpecialToken"].is_object()) {
        return Err(ipath, "expected SpecialToken or Sequence");
      }
      ASSIGN_OR_RETURN(std::string id, Str(item["SpecialToken"], "id", ipath + ".SpecialToken"));
      std::vector<int32_t> ids;
      if (specials != n.end() && specials->is_object() && specials->contains(id)) {
        const json& sp = (*specials)[id];
        if (!sp.contains("ids") || !sp["ids"].is_array()) {
          return Err(path + ".special_tokens." + id, "missing ids");
        }
        for (const json& v : sp["ids"]) {
          if (!v.is_number_integer()) return Err(path + ".special_tokens." + id, "bad id");
          ids.push_back(v.get<int32_t>());
        }
      } else {
        return Err(ipath, "special token '" + id + "' not in special_tokens");
      }
      (seen_a ? post : pre).insert((seen_a ? post : pre).end(), ids.begin(), ids.end());
    }
    p->prefix_ids.insert(p->prefix_ids.end(), pre.begin(), pre.end());
    p->suffix_ids.insert(p->suffix_ids.end(), post.begin(), post.end());
    return OkStatus();
  }

  Status Model(const json& m, Pipeline* p) const {
    if (!m.is_object()) return Err("model", "missing or not an object");
    std::string type;
    if (m.contains("type")) {
      ASSIGN_OR_RETURN(type, Str(m, "type", "model"));
    } else {
      type = m.contains("merges") ? "BPE" : m.contains("vocab") && m["vocab"].is_object() &&
                                                    m.contains("max_input_chars_per_word")
                                                ? "WordPiece"
                                                : "";
    }
    if (type != "BPE" && type != "WordPiece") {
      return Unsupported("model.type", "model '" + type + "'");
    }
    auto vit = m.find("vocab");
    if (vit == m.end() || !vit->is_object()) return Err("model.vocab", "missing or not an object");
    int64_t max_id = -1;
    for (auto it = vit->begin(); it != vit->end(); ++it) {
      if (!it.value().is_number_integer()) {
        return Err("model.vocab", "id of '" + it.key() + "' is not an integer");
      }
      const int64_t id = it.value().get<int64_t>();
      if (id < 0 || id >= kMaxVocab) {
        return Err("model.vocab", "id " + std::to_string(id) + " of '" + it.key() + "' out of range");
      }
      max_id = std::max(max_id, id);
    }
    Vocab& v = p->vocab;
    v.tokens.resize(static_cast<size_t>(max_id + 1));
    v.types.assign(v.tokens.size(), TokenType::kUnused);
    v.index.reserve(vit->size() * 2);
    for (auto it = vit->begin(); it != vit->end(); ++it) {
      const int32_t id = it.value().get<int32_t>();
      v.tokens[id] = it.key();
      v.types[id] = TokenType::kNormal;
      v.index.emplace(it.key(), id);
    }
    model_type_ = type;
    return OkStatus();
  }

  Status BuildModel(const json& m, Pipeline* p) const {
    if (model_type_ == "WordPiece") {
      ASSIGN_OR_RETURN(std::string unk, Str(m, "unk_token", "model", "[UNK]"));
      ASSIGN_OR_RETURN(std::string prefix, Str(m, "continuing_subword_prefix", "model", "##"));
      ASSIGN_OR_RETURN(int64_t max_chars, Int(m, "max_input_chars_per_word", "model", 100));
      p->unk = p->vocab.Find(unk);
      p->model = std::make_unique<WordPieceModel>(&p->vocab, p->unk, "", prefix,
                                                  static_cast<size_t>(std::max<int64_t>(max_chars, 0)));
      p->kind = "hf-wordpiece";
      return OkStatus();
    }
    BpeOptions o;
    o.byte_level = p->byte_level;
    ASSIGN_OR_RETURN(o.byte_fallback, Bool(m, "byte_fallback", "model", false));
    ASSIGN_OR_RETURN(o.fuse_unk, Bool(m, "fuse_unk", "model", false));
    ASSIGN_OR_RETURN(o.ignore_merges, Bool(m, "ignore_merges", "model", false));
    ASSIGN_OR_RETURN(std::string unk, Str(m, "unk_token", "model", ""));
    if (!unk.empty()) {
      o.unk = p->vocab.Find(unk);
      if (o.unk < 0) return Err("model.unk_token", "'" + unk + "' is not in the vocabulary");
      p->unk = o.unk;
    }
    ASSIGN_OR_RETURN(std::string csp, Str(m, "continuing_subword_prefix", "model", ""));
    ASSIGN_OR_RETURN(std::string eows, Str(m, "end_of_word_suffix", "model", ""));
    if (!csp.empty()) return Unsupported("model.continuing_subword_prefix", "a non-empty value");
    if (!eows.empty()) return Unsupported("model.end_of_word_suffix", "a non-empty value");
    if (m.contains("dropout") && m["dropout"].is_number() && m["dropout"].get<double>() > 0) {
      return Unsupported("model.dropout", "BPE dropout");
    }
    auto mit = m.find("merges");
    if (mit == m.end() || !mit->is_array()) return Err("model.merges", "missing or not an array");
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(mit->size());
    for (size_t i = 0; i < mit->size(); ++i) {
      const json& e = (*mit)[i];
      if (e.is_string()) {
        const std::string& s = e.get_ref<const std::string&>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
          return Err("model.merges[" + std::to_string(i) + "]",
                     "expected \"a b\" with exactly one space, got '" + s + "'");
        }
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      } else {
        return Err("model.merges[" + std::to_string(i) + "]", "expected \"a b\" or [\"a\", \"b\"]");
      }
    }
    auto bpe = BpeModel::Create(&p->vocab, merges, o, name_);
    if (!bpe.ok()) return bpe.status();
    p->model = std::move(bpe).value();
    p->kind = "hf-bpe";
    return OkStatus();
  }

  Status AddedTokensList(const json& root, Pipeline* p) const {
    auto it = root.find("added_tokens");
    if (it == root.end() || it->is_null()) return OkStatus();
    if (!it->is_array()) return Err("added_tokens", "expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& a = (*it)[i];
      const std::string path = "added_tokens[" + std::to_string(i) + "]";
      if (!a.is_object()) return Err(path, "expected an object");
      AddedToken t;
      ASSIGN_OR_RETURN(int64_t id, Int(a, "id", path, -1));
      if (id < 0 || id >= kMaxVocab) return Err(path + ".id", "missing or out of range");
      t.id = static_cast<int32_t>(id);
      ASSIGN_OR_RETURN(t.content, Str(a, "content", path));
      ASSIGN_OR_RETURN(t.special, Bool(a, "special", path, false));
      ASSIGN_OR_RETURN(t.lstrip, Bool(a, "lstrip", path, false));
      ASSIGN_OR_RETURN(t.rstrip, Bool(a, "rstrip", path, false));
      ASSIGN_OR_RETURN(t.single_word, Bool(a, "single_word", path, false));
      ASSIGN_OR_RETURN(t.normalized, Bool(a, "normalized", path, !t.special));
      Vocab& v = p->vocab;
      if (static_cast<size_t>(t.id) >= v.tokens.size()) {
        v.tokens.resize(t.id + 1);
        v.types.resize(t.id + 1, TokenType::kUnused);
      }
      if (v.tokens[t.id].empty() || v.types[t.id] == TokenType::kUnused) v.tokens[t.id] = t.content;
      v.types[t.id] = t.special ? TokenType::kControl : TokenType::kUserDefined;
      v.index.emplace(t.content, t.id);
      p->added.Add(std::move(t));
    }
    p->added.Build();
    return OkStatus();
  }

  mutable std::string model_type_;

 private:
  std::string name_;
};

// "<s>" or {"content": "<s>", ...} -> "<s>"; "" if absent.
std::string TokenField(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return "";
}

Status ApplyConfig(const json& cfg, const std::string& name, Pipeline* p) {
  if (!cfg.is_object()) return InvalidArgument(name + ": tokenizer_config.json is not an object");
  auto ct = cfg.find("chat_template");
  if (ct != cfg.end()) {
    if (ct->is_string()) {
      p->chat_template = ct->get<std::string>();
    } else if (ct->is_array()) {
      for (const json& t : *ct) {
        if (t.is_object() && t.contains("name") && t["name"] == "default" && t.contains("template") &&
            t["template"].is_string()) {
          p->chat_template = t["template"].get<std::string>();
        }
      }
    }
  }
  auto cu = cfg.find("clean_up_tokenization_spaces");
  if (cu != cfg.end() && cu->is_boolean()) p->clean_up_spaces = cu->get<bool>();
  const std::string bos = TokenField(cfg, "bos_token"), eos = TokenField(cfg, "eos_token");
  const std::string pad = TokenField(cfg, "pad_token"), unk = TokenField(cfg, "unk_token");
  if (!bos.empty() && p->vocab.Find(bos) >= 0) p->bos = p->vocab.Find(bos);
  if (!eos.empty() && p->vocab.Find(eos) >= 0) p->eos = p->vocab.Find(eos);
  if (!pad.empty() && p->vocab.Find(pad) >= 0) p->pad = p->vocab.Find(pad);
  if (!unk.empty() && p->vocab.Find(unk) >= 0) p->unk = p->vocab.Find(unk);
  return OkStatus();
}

Result<std::unique_ptr<Pipeline>> Load(std::string_view tokenizer_json,
                                       std::string_view config_json, const std::string& name) {
  ASSIGN_OR_RETURN(json root, ParseJsonDocument(tokenizer_json, name));
  if (!root.is_object()) return InvalidArgument(name + ": top level is not a JSON object");
  auto p = std::make_unique<Pipeline>();
  Loader l(name);
  auto model = root.find("model");
  if (model == root.end()) return InvalidArgument(name + ": model: missing");
  RETURN_IF_ERROR(l.Model(*model, p.get()));
  RETURN_IF_ERROR(l.AddedTokensList(root, p.get()));
  RETURN_IF_ERROR(l.Normalizer(root.value("normalizer", json()), "normalizer", &p->normalizers));
  RETURN_IF_ERROR(
      l.PreTokenizer(root.value("pre_tokenizer", json()), "pre_tokenizer", &p->pre_tokenizers));
  for (const PreStep& s : p->pre_tokenizers) p->byte_level |= s.kind == PreStep::kByteLevel;
  // Normalized added tokens are searched for in their normalized form.
  if (!p->normalizers.empty()) {
    for (AddedToken& t : p->added.mutable_tokens()) {
      if (t.normalized) t.match = ApplyNormalizers(p->normalizers, t.content);
    }
    p->added.Build();
  }
  RETURN_IF_ERROR(l.BuildModel(*model, p.get()));
  RETURN_IF_ERROR(l.Decoder(root.value("decoder", json()), "decoder", &p->decoders));
  RETURN_IF_ERROR(
      l.PostProcessor(root.value("post_processor", json()), "post_processor", p.get()));
  for (int32_t id : p->prefix_ids) {
    if (id < 0 || id >= p->vocab.size()) return InvalidArgument(name + ": post_processor: id " + std::to_string(id) + " out of range");
  }
  for (int32_t id : p->suffix_ids) {
    if (id < 0 || id >= p->vocab.size()) return InvalidArgument(name + ": post_processor: id " + std::to_string(id) + " out of range");
  }
  if (!config_json.empty()) {
    ASSIGN_OR_RETURN(json cfg, ParseJsonDocument(config_json, name + ": tokenizer_config.json"));
    RETURN_IF_ERROR(ApplyConfig(cfg, name, p.get()));
  }
  if (p->bos < 0 && !p->prefix_ids.empty()) p->bos = p->prefix_ids.front();
  if (p->eos < 0 && !p->suffix_ids.empty()) p->eos = p->suffix_ids.back();
  p->add_bos = p->bos >= 0 && std::count(p->prefix_ids.begin(), p->prefix_ids.end(), p->bos) > 0;
  p->add_eos = p->eos >= 0 && std::count(p->suffix_ids.begin(), p->suffix_ids.end(), p->eos) > 0;
  p->FinishSpecials();
  return p;
}

}  // namespace

Result<std::unique_ptr<Pipeline>> LoadHfTokenizer(std::string_view tokenizer_json,
                                                  std::string_view config_json,
                                                  const std::string& name) {
  try {
    return Load(tokenizer_json, config_json, name);
  } catch (const std::exception& e) {
    return InvalidArgument(name + ": malformed tokenizer JSON: " + e.what());
  }
}

}  // namespace tachyon::tokenizer
