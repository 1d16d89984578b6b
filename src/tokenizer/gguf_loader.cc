// GGUF tokenizer.ggml.* -> Pipeline.
#include "tokenizer/gguf_loader.h"

#include <algorithm>

#include "gguf/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {
namespace {

constexpr char kSpace[] = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

Status Err(const gguf::GgufFile& f, const std::string& key, const std::string& msg) {
  return InvalidArgument(f.path() + ": " + key + ": " + msg);
}

Result<const gguf::Value*> Array(const gguf::GgufFile& f, const std::string& key,
                                 gguf::ValueType elem, bool required) {
  const gguf::Value* v = f.Find(key);
  if (v == nullptr) {
    if (required) return Err(f, key, "missing");
    return static_cast<const gguf::Value*>(nullptr);
  }
  if (v->type != gguf::ValueType::kArray) return Err(f, key, "expected an array");
  for (const gguf::Value& e : v->arr) {
    const bool ok = elem == gguf::ValueType::kString ? e.type == gguf::ValueType::kString
                                                     : e.IsInteger() || e.IsFloat();
    if (!ok) return Err(f, key, "array element of type " + std::string(gguf::ValueTypeName(e.type)));
  }
  return v;
}

int32_t SpecialId(const gguf::GgufFile& f, const std::string& key, int32_t n) {
  auto v = f.GetInt(key);
  if (!v || *v < 0 || *v >= n) return -1;
  return static_cast<int32_t>(*v);
}

Status LoadPre(const gguf::GgufFile& f, const std::string& pre, bool* ignore_merges,
               Pipeline* p) {
  std::vector<std::string> patterns;
  auto st = GgufPreTokenizerPatterns(pre, &patterns, ignore_merges);
  if (!st.ok()) return st.WithContext(f.path());
  for (const std::string& pat : patterns) {
    ASSIGN_OR_RETURN(auto re, Regex::Compile(pat));
    PreStep s{};
    s.kind = PreStep::kSplit;
    s.regex = std::shared_ptr<Regex>(std::move(re));
    s.behavior = SplitBehavior::kIsolated;
    p->pre_tokenizers.push_back(std::move(s));
  }
  PreStep bl{};
  bl.kind = PreStep::kByteLevel;
  p->pre_tokenizers.push_back(std::move(bl));
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<Pipeline>> LoadGgufTokenizer(const gguf::GgufFile& f) {
  const std::string model = f.GetString("tokenizer.ggml.model").value_or("");
  if (model.empty()) return Err(f, "tokenizer.ggml.model", "missing (the file has no tokenizer)");
  if (model != "llama" && model != "gpt2" && model != "bert") {
    return Unimplemented(f.path() + ": tokenizer.ggml.model '" + model + "' is not supported");
  }
  auto p = std::make_unique<Pipeline>();
  p->kind = model;
  ASSIGN_OR_RETURN(const gguf::Value* tokens,
                   Array(f, "tokenizer.ggml.tokens", gguf::ValueType::kString, true));
  ASSIGN_OR_RETURN(const gguf::Value* types,
                   Array(f, "tokenizer.ggml.token_type", gguf::ValueType::kInt32, false));
  ASSIGN_OR_RETURN(const gguf::Value* scores,
                   Array(f, "tokenizer.ggml.scores", gguf::ValueType::kFloat32, false));
  const size_t n = tokens->arr.size();
  if (n == 0 || n > (1u << 24)) return Err(f, "tokenizer.ggml.tokens", "bad token count " + std::to_string(n));
  if (types && types->arr.size() != n) {
    return Err(f, "tokenizer.ggml.token_type", "has " + std::to_string(types->arr.size()) +
                                                   " entries for " + std::to_string(n) + " tokens");
  }
  if (scores && scores->arr.size() != n) {
    return Err(f, "tokenizer.ggml.scores", "has " + std::to_string(scores->arr.size()) +
                                               " entries for " + std::to_string(n) + " tokens");
  }
  Vocab& v = p->vocab;
  v.tokens.resize(n);
  v.types.resize(n, TokenType::kNormal);
  v.index.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    v.tokens[i] = tokens->arr[i].s;
    if (types) {
      const int64_t t = types->arr[i].AsInt().value_or(1);
      v.types[i] = t >= 0 && t <= 6 ? static_cast<TokenType>(t) : TokenType::kNormal;
    }
    if (scores) v.scores.push_back(static_cast<float>(scores->arr[i].AsDouble().value_or(0)));
    v.index.emplace(v.tokens[i], static_cast<int32_t>(i));
  }
  const int32_t nv = static_cast<int32_t>(n);
  p->bos = SpecialId(f, "tokenizer.ggml.bos_token_id", nv);
  p->eos = SpecialId(f, "tokenizer.ggml.eos_token_id", nv);
  p->eot = SpecialId(f, "tokenizer.ggml.eot_token_id", nv);
  p->pad = SpecialId(f, "tokenizer.ggml.padding_token_id", nv);
  p->unk = SpecialId(f, "tokenizer.ggml.unknown_token_id", nv);
  const int32_t eom = SpecialId(f, "tokenizer.ggml.eom_token_id", nv);
  p->chat_template = f.GetString("tokenizer.chat_template");

  // Control, unknown and user-defined tokens are matched whole in text.
  for (int32_t id = 0; id < nv; ++id) {
    const TokenType t = v.types[id];
    if (t != TokenType::kControl && t != TokenType::kUserDefined && t != TokenType::kUnknown) continue;
    AddedToken a;
    a.id = id;
    a.content = v.tokens[id];
    a.special = t != TokenType::kUserDefined;
    p->added.Add(std::move(a));
  }
  p->added.Build();

  const std::string pre = f.GetString("tokenizer.ggml.pre").value_or("default");
  bool add_bos = false, add_eos = false;
  if (model == "llama") {
    const bool space_prefix = f.GetBool("tokenizer.ggml.add_space_prefix").value_or(true);
    if (space_prefix) {
      NormStep prepend{};
      prepend.kind = NormStep::kPrepend;
      prepend.content = kSpace;
      p->normalizers.push_back(prepend);
    }
    NormStep rep{};
    rep.kind = NormStep::kReplace;
    rep.pattern = " ";
    rep.content = kSpace;
    p->normalizers.push_back(rep);
    ASSIGN_OR_RETURN(p->model, SpmModel::Create(&p->vocab, p->unk, f.path()));
    DecStep d{};
    d.kind = DecStep::kReplace;
    d.pattern = kSpace;
    d.content = " ";
    p->decoders.push_back(d);
    d = DecStep{};
    d.kind = DecStep::kByteFallback;
    p->decoders.push_back(d);
    d.kind = DecStep::kFuse;
    p->decoders.push_back(d);
    if (space_prefix) {
      d.kind = DecStep::kStrip;
      d.content = " ";
      d.start = 1;
      p->decoders.push_back(d);
    }
    add_bos = true;
  } else if (model == "gpt2") {
    bool ignore_merges = false;
    RETURN_IF_ERROR(LoadPre(f, pre, &ignore_merges, p.get()));
    p->byte_level = true;
    p->literal_user_defined = true;
    ASSIGN_OR_RETURN(const gguf::Value* merges_v,
                     Array(f, "tokenizer.ggml.merges", gguf::ValueType::kString, true));
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(merges_v->arr.size());
    for (size_t i = 0; i < merges_v->arr.size(); ++i) {
      const std::string& s = merges_v->arr[i].s;
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) {
        return Err(f, "tokenizer.ggml.merges", "entry " + std::to_string(i) + " '" + s +
                                                   "' is not two tokens separated by a space");
      }
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
    BpeOptions o;
    o.byte_level = true;
    o.ignore_merges = ignore_merges;
    ASSIGN_OR_RETURN(p->model, BpeModel::Create(&p->vocab, merges, o, f.path()));
    DecStep d{};
    d.kind = DecStep::kByteLevel;
    p->decoders.push_back(d);
    add_bos = ignore_merges;  // Llama 3 style vocabularies start with BOS
  } else {  // bert
    NormStep bn{};
    bn.kind = NormStep::kBert;
    bn.lowercase = true;
    bn.strip_accents = true;
    p->normalizers.push_back(bn);
    PreStep bp{};
    bp.kind = PreStep::kBert;
    p->pre_tokenizers.push_back(bp);
    p->model = std::make_unique<WordPieceModel>(&p->vocab, p->unk, kSpace, "", 100);
    DecStep d{};
    d.kind = DecStep::kGgufWordPiece;
    p->decoders.push_back(d);
    const int32_t cls = SpecialId(f, "tokenizer.ggml.cls_token_id", nv);
    int32_t sep = SpecialId(f, "tokenizer.ggml.seperator_token_id", nv);
    if (sep < 0) sep = SpecialId(f, "tokenizer.ggml.separator_token_id", nv);
    if (cls >= 0) p->bos = cls;
    if (sep >= 0) p->eos = sep;
    add_bos = add_eos = true;
  }
  p->add_bos = f.GetBool("tokenizer.ggml.add_bos_token").value_or(add_bos) && p->bos >= 0;
  p->add_eos = f.GetBool("tokenizer.ggml.add_eos_token").value_or(add_eos) && p->eos >= 0;
  if (p->add_bos) p->prefix_ids.push_back(p->bos);
  if (p->add_eos) p->suffix_ids.push_back(p->eos);
  p->FinishSpecials();
  if (eom >= 0) {
    p->eog.push_back(eom);
    std::sort(p->eog.begin(), p->eog.end());
    p->eog.erase(std::unique(p->eog.begin(), p->eog.end()), p->eog.end());
  }
  return p;
}

}  // namespace tachyon::tokenizer
