#include "tokenizer/tokenizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "tokenizer/gguf_loader.h"
#include "tokenizer/hf_loader.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/unicode.h"
#include "util/mmap_file.h"

namespace tachyon::tokenizer {

// ---- Pipeline ----

void Pipeline::Encode(std::string_view text, bool add_special, bool parse_special,
                      std::vector<int32_t>* out, const AddedTokens::Ranges* special_ranges) const {
  std::string clean;
  if (!special_ranges && !IsValidUtf8(text)) {
    clean = Utf8Lossy(text);
    text = clean;
  }
  if (add_special) out->insert(out->end(), prefix_ids.begin(), prefix_ids.end());
  std::vector<AddedTokens::Segment> raw_segs, norm_segs;
  std::vector<std::string> pieces;
  added.Split(text, /*normalized=*/false, parse_special, &raw_segs, special_ranges);
  for (const auto& seg : raw_segs) {
    if (seg.id >= 0) {
      out->push_back(seg.id);
      continue;
    }
    std::string norm = ApplyNormalizers(normalizers, std::string(text.substr(seg.begin, seg.end - seg.begin)));
    norm_segs.clear();
    // Offsets in normalized text do not map back to `text`: normalized special tokens match
    // only in a text segment that lies wholly inside one special range.
    bool norm_special = parse_special;
    if (special_ranges) {
      norm_special =
          norm_special &&
          std::any_of(special_ranges->begin(), special_ranges->end(),
                      [&](const auto& r) { return r.first <= seg.begin && seg.end <= r.second; });
    }
    added.Split(norm, /*normalized=*/true, norm_special, &norm_segs);
    for (const auto& ns : norm_segs) {
      if (ns.id >= 0) {
        out->push_back(ns.id);
        continue;
      }
      pieces.clear();
      ApplyPreTokenizers(pre_tokenizers, norm.substr(ns.begin, ns.end - ns.begin),
                         seg.begin == 0 && ns.begin == 0, &pieces);
      for (const std::string& piece : pieces) model->Encode(piece, out);
    }
  }
  if (add_special) out->insert(out->end(), suffix_ids.begin(), suffix_ids.end());
}

std::string Pipeline::Decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab.size()) continue;
    const TokenType t = vocab.types[id];
    if (skip_special && (t == TokenType::kControl || t == TokenType::kUnknown)) continue;
    if (literal_user_defined && t == TokenType::kUserDefined) {
      tokens.push_back(BytesToByteLevel(vocab.tokens[id]));
    } else {
      tokens.push_back(vocab.tokens[id]);
    }
  }
  if (decoders.empty()) {
    std::string all;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) all.push_back(' ');
      all += tokens[i];
    }
    return Utf8Lossy(all);
  }
  return Utf8Lossy(ApplyDecoders(decoders, std::move(tokens)));
}

void Pipeline::FinishSpecials() {
  static const char* const kEnd[] = {
      "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
      "<|end_of_text|>", "<|EOT|>", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
      "<|return|>", "<|call|>", "<|im_end|>", "<EOT>", "<|END_OF_TURN_TOKEN|>"};
  if (eot < 0) {
    for (const char* s : {"<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<|EOT|>",
                          "<|END_OF_TURN_TOKEN|>", "<EOT>"}) {
      const int32_t id = vocab.Find(s);
      if (id >= 0 && (vocab.types[id] == TokenType::kControl ||
                      vocab.types[id] == TokenType::kUserDefined)) {
        eot = id;
        break;
      }
    }
  }
  eog.clear();
  if (eos >= 0) eog.push_back(eos);
  if (eot >= 0) eog.push_back(eot);
  for (const char* s : kEnd) {
    const int32_t id = vocab.Find(s);
    if (id >= 0 && (vocab.types[id] == TokenType::kControl ||
                    vocab.types[id] == TokenType::kUserDefined)) {
      eog.push_back(id);
    }
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  if (bos >= 0) bos_text = vocab.tokens[bos];
  if (eos >= 0) eos_text = vocab.tokens[eos];
}

// ---- Tokenizer ----

Tokenizer::Tokenizer(std::unique_ptr<Pipeline> pipeline) : pipeline_(std::move(pipeline)) {}
Tokenizer::~Tokenizer() = default;

namespace {

// A GGUF converted from a Hugging Face folder may carry its tokenizer only as the whole
// tokenizer.json (tokenizer.huggingface.json) plus tokenizer.chat_template and the BOS/EOS ids.
Result<std::unique_ptr<Pipeline>> LoadGgufHfJson(const gguf::GgufFile& file,
                                                 const std::string& tokenizer_json) {
  std::string config;
  if (std::optional<std::string> t = file.GetString("tokenizer.chat_template")) {
    // Only the template: the ids below come from the GGUF keys.
    nlohmann::json cfg = nlohmann::json::object();
    cfg["chat_template"] = *t;
    config = cfg.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  ASSIGN_OR_RETURN(auto p, LoadHfTokenizer(tokenizer_json, config,
                                           file.path() + ": tokenizer.huggingface.json"));
  const int32_t n = p->vocab.size();
  for (auto [key, field] : {std::pair{"tokenizer.ggml.bos_token_id", &p->bos},
                            std::pair{"tokenizer.ggml.eos_token_id", &p->eos}}) {
    std::optional<int64_t> id = file.GetInt(key);
    if (!id) continue;
    if (*id < 0 || *id >= n) {
      return InvalidArgument(file.path() + ": " + key + " = " + std::to_string(*id) +
                             " is outside the vocabulary of " + std::to_string(n));
    }
    *field = static_cast<int32_t>(*id);
  }
  p->FinishSpecials();
  return p;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::GgufFile& file) {
  if (!file.GetString("tokenizer.ggml.model")) {
    if (std::optional<std::string> hf = file.GetString("tokenizer.huggingface.json")) {
      ASSIGN_OR_RETURN(auto p, LoadGgufHfJson(file, *hf));
      return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(p)));
    }
  }
  ASSIGN_OR_RETURN(auto p, LoadGgufTokenizer(file));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(p)));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromHfJson(std::string_view tokenizer_json,
                                                         std::string_view config_json,
                                                         const std::string& name) {
  ASSIGN_OR_RETURN(auto p, LoadHfTokenizer(tokenizer_json, config_json, name));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(p)));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return NotFound(path + ": no such file or directory");
  std::string json_path = path;
  if (S_ISDIR(st.st_mode)) {
    json_path = path + "/tokenizer.json";
    if (stat(json_path.c_str(), &st) != 0) {
      return NotFound(path + ": folder has no tokenizer.json");
    }
  } else {
    // A GGUF file starts with the magic "GGUF".
    char magic[4] = {};
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      const size_t n = std::fread(magic, 1, 4, f);
      std::fclose(f);
      if (n == 4 && std::string_view(magic, 4) == "GGUF") {
        ASSIGN_OR_RETURN(auto file, gguf::GgufFile::Open(path));
        return FromGguf(file);
      }
    }
    ASSIGN_OR_RETURN(std::string head, ReadFileToString(path));
    std::string dir = path.substr(0, path.find_last_of('/') + 1);
    std::string config;
    std::string cfg_path = dir + "tokenizer_config.json";
    if (stat(cfg_path.c_str(), &st) == 0) {
      ASSIGN_OR_RETURN(config, ReadFileToString(cfg_path));
    }
    return FromHfJson(head, config, path);
  }
  ASSIGN_OR_RETURN(std::string json, ReadFileToString(json_path));
  std::string config;
  const std::string cfg_path = path + "/tokenizer_config.json";
  if (stat(cfg_path.c_str(), &st) == 0) {
    ASSIGN_OR_RETURN(config, ReadFileToString(cfg_path));
  }
  return FromHfJson(json, config, json_path);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> ids;
  pipeline_->Encode(text, add_special, parse_special, &ids);
  return ids;
}

std::vector<int32_t> Tokenizer::EncodeSegments(std::span<const TextSegment> segments,
                                               bool add_special) const {
  std::string text;
  AddedTokens::Ranges special_ranges;
  for (const TextSegment& seg : segments) {
    const size_t begin = text.size();
    if (IsValidUtf8(seg.text)) {
      text.append(seg.text);
    } else {
      text += Utf8Lossy(seg.text);
    }
    if (!seg.parse_special || text.size() == begin) continue;
    if (!special_ranges.empty() && special_ranges.back().second == begin) {
      special_ranges.back().second = text.size();
    } else {
      special_ranges.emplace_back(begin, text.size());
    }
  }
  std::vector<int32_t> ids;
  pipeline_->Encode(text, add_special, /*parse_special=*/true, &ids, &special_ranges);
  return ids;
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special) const {
  return pipeline_->Decode(ids, skip_special);
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  const Pipeline& p = *pipeline_;
  if (id < 0 || id >= p.vocab.size()) return "";
  const std::string& s = p.vocab.tokens[id];
  const TokenType t = p.vocab.types[id];
  if (p.byte_level && !(p.literal_user_defined && t == TokenType::kUserDefined)) {
    std::string bytes;
    if (ByteLevelToBytes(s, &bytes)) return bytes;
    return s;
  }
  // A malformed "<0x..>" spelling (e.g. "<0xZZ>" in a broken GGUF) is ordinary text below.
  if (t == TokenType::kByte || p.kind == "hf-bpe") {
    if (const int b = ParseByteToken(s); b >= 0) return std::string(1, static_cast<char>(b));
  }
  // SentencePiece / Metaspace spellings use U+2581 for spaces.
  std::string out;
  size_t pos = 0;
  while (pos < s.size()) {
    if (s.compare(pos, 3, "\xE2\x96\x81") == 0) {
      out.push_back(' ');
      pos += 3;
    } else {
      out.push_back(s[pos++]);
    }
  }
  if (p.kind == "hf-wordpiece" && out.compare(0, 2, "##") == 0) out.erase(0, 2);
  return out;
}

int32_t Tokenizer::vocab_size() const { return pipeline_->vocab.size(); }
std::string_view Tokenizer::TokenText(int32_t id) const {
  if (id < 0 || id >= pipeline_->vocab.size()) return {};
  return pipeline_->vocab.tokens[id];
}
int32_t Tokenizer::TokenId(std::string_view text) const { return pipeline_->vocab.Find(text); }
TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= pipeline_->vocab.size()) return TokenType::kUndefined;
  return pipeline_->vocab.types[id];
}
bool Tokenizer::IsSpecial(int32_t id) const {
  const TokenType t = token_type(id);
  return t == TokenType::kControl || t == TokenType::kUnknown;
}
int32_t Tokenizer::bos_id() const { return pipeline_->bos; }
int32_t Tokenizer::eos_id() const { return pipeline_->eos; }
int32_t Tokenizer::eot_id() const { return pipeline_->eot; }
int32_t Tokenizer::pad_id() const { return pipeline_->pad; }
int32_t Tokenizer::unk_id() const { return pipeline_->unk; }
bool Tokenizer::add_bos() const { return pipeline_->add_bos; }
bool Tokenizer::add_eos() const { return pipeline_->add_eos; }
std::vector<int32_t> Tokenizer::EogIds() const { return pipeline_->eog; }
bool Tokenizer::IsEog(int32_t id) const {
  return std::binary_search(pipeline_->eog.begin(), pipeline_->eog.end(), id);
}
std::optional<std::string> Tokenizer::chat_template() const { return pipeline_->chat_template; }
std::string Tokenizer::bos_text() const { return pipeline_->bos_text; }
std::string Tokenizer::eos_text() const { return pipeline_->eos_text; }
bool Tokenizer::clean_up_tokenization_spaces() const { return pipeline_->clean_up_spaces; }
std::string Tokenizer::CleanUpTokenizationSpaces(std::string text) {
  return CleanupTokenizationSpaces(std::move(text));
}
std::string_view Tokenizer::kind() const { return pipeline_->kind; }

}  // namespace tachyon::tokenizer
