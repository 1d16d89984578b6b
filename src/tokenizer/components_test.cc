// Unit tests of pipeline components on small hand-made tokenizers, metadata, and malformed
// inputs.
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {
namespace {

using Pieces = std::vector<std::string>;

Pieces Pre(const std::vector<PreStep>& steps, const std::string& text) {
  Pieces p;
  ApplyPreTokenizers(steps, text, true, &p);
  return p;
}

PreStep SplitLiteral(const std::string& lit, SplitBehavior b) {
  PreStep s{};
  s.kind = PreStep::kSplit;
  s.regex = std::shared_ptr<Regex>(Regex::Compile("\\" + lit).value());
  s.behavior = b;
  return s;
}

TEST(PreTokenizer, SplitBehaviors) {
  const std::string t = "the-final--countdown";
  EXPECT_EQ(Pre({SplitLiteral("-", SplitBehavior::kRemoved)}, t), (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(Pre({SplitLiteral("-", SplitBehavior::kIsolated)}, t),
            (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(Pre({SplitLiteral("-", SplitBehavior::kMergedWithPrevious)}, t),
            (Pieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(Pre({SplitLiteral("-", SplitBehavior::kMergedWithNext)}, t),
            (Pieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(Pre({SplitLiteral("-", SplitBehavior::kContiguous)}, t),
            (Pieces{"the", "-", "final", "--", "countdown"}));
}

TEST(PreTokenizer, DigitsPunctuationWhitespace) {
  PreStep d{};
  d.kind = PreStep::kDigits;
  d.individual_digits = true;
  EXPECT_EQ(Pre({d}, "ab123"), (Pieces{"ab", "1", "2", "3"}));
  d.individual_digits = false;
  EXPECT_EQ(Pre({d}, "ab123c"), (Pieces{"ab", "123", "c"}));
  PreStep p{};
  p.kind = PreStep::kPunctuation;
  EXPECT_EQ(Pre({p}, "hi,there!"), (Pieces{"hi", ",", "there", "!"}));
  PreStep w{};
  w.kind = PreStep::kWhitespace;
  w.regex = std::shared_ptr<Regex>(Regex::Compile("\\w+|[^\\w\\s]+").value());
  EXPECT_EQ(Pre({w}, "Hey man!!  ok"), (Pieces{"Hey", "man", "!!", "ok"}));
  PreStep ws{};
  ws.kind = PreStep::kWhitespaceSplit;
  EXPECT_EQ(Pre({ws}, " a\tb\n c "), (Pieces{"a", "b", "c"}));
  PreStep b{};
  b.kind = PreStep::kBert;
  EXPECT_EQ(Pre({b}, "Hi, you!"), (Pieces{"Hi", ",", "you", "!"}));
}

TEST(PreTokenizer, MetaspaceAndByteLevel) {
  PreStep m{};
  m.kind = PreStep::kMetaspace;
  m.replacement = "\xE2\x96\x81";
  m.prepend = PreStep::kAlways;
  EXPECT_EQ(Pre({m}, "Hey friend"), (Pieces{"\xE2\x96\x81Hey", "\xE2\x96\x81" "friend"}));
  m.split = false;
  EXPECT_EQ(Pre({m}, "Hey friend"), (Pieces{"\xE2\x96\x81Hey\xE2\x96\x81" "friend"}));
  m.prepend = PreStep::kNever;
  EXPECT_EQ(Pre({m}, "Hey"), (Pieces{"Hey"}));
  PreStep bl{};
  bl.kind = PreStep::kByteLevel;
  bl.add_prefix_space = true;
  bl.regex = std::shared_ptr<Regex>(Regex::Compile(kGpt2Pattern).value());
  EXPECT_EQ(Pre({bl}, "Hello  world's"), (Pieces{" Hello", " ", " world", "'s"}));
}

TEST(Regex, UnicodeClassesAndLookahead) {
  auto re = Regex::Compile("\\s+(?!\\S)|\\p{L}+|(?i:'S)").value();
  std::vector<std::pair<size_t, size_t>> m;
  re->FindAll("ab   c'S", &m);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[1], (std::pair<size_t, size_t>{2, 4}));  // two spaces: the last one stays
  EXPECT_FALSE(Regex::Compile("(unclosed").ok());
}

TEST(Normalizer, Steps) {
  NormStep nfkc{};
  nfkc.kind = NormStep::kNfkc;
  EXPECT_EQ(ApplyNormalizers({nfkc}, "\xEF\xAC\x81"), "fi");
  NormStep nfc{};
  nfc.kind = NormStep::kNfc;
  EXPECT_EQ(ApplyNormalizers({nfc}, "e\xCC\x81"), "\xC3\xA9");
  NormStep lower{};
  lower.kind = NormStep::kLowercase;
  EXPECT_EQ(ApplyNormalizers({lower}, "\xC3\x80" "B"), "\xC3\xA0" "b");
  NormStep prepend{};
  prepend.kind = NormStep::kPrepend;
  prepend.content = "_";
  EXPECT_EQ(ApplyNormalizers({prepend}, ""), "");
  EXPECT_EQ(ApplyNormalizers({prepend}, "a"), "_a");
  NormStep strip{};
  strip.kind = NormStep::kStrip;
  strip.left = strip.right = true;
  EXPECT_EQ(ApplyNormalizers({strip}, "  a b \n"), "a b");
  NormStep bert{};
  bert.kind = NormStep::kBert;
  bert.lowercase = bert.strip_accents = true;
  EXPECT_EQ(ApplyNormalizers({bert}, "C\xC3\xA0t\t\xE4\xBD\xA0"), "cat  \xE4\xBD\xA0 ");
}

TEST(Decoder, Steps) {
  DecStep bf{};
  bf.kind = DecStep::kByteFallback;
  EXPECT_EQ(ApplyDecoders({bf}, {"<0xE4>", "<0xBD>", "<0xA0>", "x"}), "\xE4\xBD\xA0x");
  EXPECT_EQ(ApplyDecoders({bf}, {"<0xE4>", "<0xBD>", "x"}), "\xEF\xBF\xBD\xEF\xBF\xBDx");
  DecStep strip{};
  strip.kind = DecStep::kStrip;
  strip.content = " ";
  strip.start = 1;
  EXPECT_EQ(ApplyDecoders({strip}, {"  a", " b"}), " ab");
  DecStep wp{};
  wp.kind = DecStep::kWordPiece;
  EXPECT_EQ(ApplyDecoders({wp}, {"un", "##aff", "##able", "!", "do", "n't"}), "unaffable! don't");
  EXPECT_EQ(CleanupTokenizationSpaces("a . b , c n't"), "a. b, cn't");
  DecStep bl{};
  bl.kind = DecStep::kByteLevel;
  EXPECT_EQ(ApplyDecoders({bl}, {"\xC4\xA0hi", "<|x|>"}), " hi<|x|>");
}

// A small WordPiece tokenizer.json in Hugging Face's BERT shape.
const char kWordPieceJson[] = R"({
  "added_tokens": [
    {"id": 0, "content": "[UNK]", "special": true},
    {"id": 1, "content": "[CLS]", "special": true},
    {"id": 2, "content": "[SEP]", "special": true},
    {"id": 10, "content": "Foo", "special": false, "normalized": true}],
  "normalizer": {"type": "BertNormalizer", "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]},
  "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "world": 4, "##s": 5,
                      "!": 6, "un": 7, "##aff": 8, "##able": 9}}})";

TEST(HfJson, WordPiece) {
  auto tok = Tokenizer::FromHfJson(kWordPieceJson, "", "wp.json");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const auto ids = (*tok)->Encode("Hello WORLDS! Unaffable zzz", true);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3, 4, 5, 6, 7, 8, 9, 0, 2}));
  EXPECT_EQ((*tok)->Decode(ids, true), "hello worlds! unaffable");
  // A normalized added token is matched in its normalized form ("Foo" -> "foo").
  EXPECT_EQ((*tok)->Encode("FOO hello", false), (std::vector<int32_t>{10, 3}));
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_EQ((*tok)->eos_id(), 2);
  EXPECT_TRUE((*tok)->add_bos() && (*tok)->add_eos());
}

// SentencePiece-style BPE with Metaspace, byte fallback and added tokens with strip flags.
const char kMetaspaceJson[] = R"({
  "added_tokens": [
    {"id": 8, "content": "<m>", "special": true, "lstrip": true, "rstrip": true},
    {"id": 9, "content": "xy", "special": false, "single_word": true}],
  "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"},
  "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"},
              {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}]},
  "post_processor": {"type": "TemplateProcessing",
      "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<m>", "type_id": 0}}],
      "special_tokens": {"<m>": {"id": "<m>", "ids": [8], "tokens": ["<m>"]}}},
  "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
            "vocab": {"<unk>": 0, "\u2581": 1, "a": 2, "b": 3, "\u2581a": 4, "ab": 5, "\u2581ab": 6,
                      "<0x0A>": 7, "<m>": 8, "xy": 9, "x": 10, "y": 11, "z": 12},
            "merges": [["\u2581", "a"], "a b", "\u2581a b"]}})";

TEST(HfJson, MetaspaceByteFallbackAddedTokens) {
  auto tok = Tokenizer::FromHfJson(kMetaspaceJson, "", "ms.json");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.Encode("ab ab", false), (std::vector<int32_t>{6, 6}));
  EXPECT_EQ(t.Encode("a\n", false), (std::vector<int32_t>{4, 7}));
  EXPECT_EQ(t.Decode({4, 7}), "a\n");
  // lstrip/rstrip swallow the spaces around <m>.
  EXPECT_EQ(t.Encode("a <m> a", false), (std::vector<int32_t>{4, 8, 4}));
  // Not parsed: "<m>" is plain text ('<', 'm', '>' are unknown and not bytes in this vocab).
  const auto plain = t.Encode("a <m>", false, /*parse_special=*/false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 8), 0);
  // single_word: "xy" only matches as a whole word.
  EXPECT_EQ(t.Encode("xyz xy", false), (std::vector<int32_t>{1, 10, 11, 12, 1, 9}));
  // The template appends <m>.
  EXPECT_EQ(t.Encode("a", true), (std::vector<int32_t>{4, 8}));
  EXPECT_FALSE(t.add_bos());
}

TEST(Metadata, SpecialIdsAndTemplates) {
  if (const Tokenizer* t = testing_util::HfTokenizer("llama3")) {
    EXPECT_EQ(t->bos_id(), 128000);
    EXPECT_EQ(t->eos_id(), 128001);
    EXPECT_EQ(t->eot_id(), 128009);
    EXPECT_TRUE(t->IsEog(128001) && t->IsEog(128009));
    EXPECT_FALSE(t->IsEog(128000));
    EXPECT_TRUE(t->chat_template().has_value());
    EXPECT_EQ(t->bos_text(), "<|begin_of_text|>");
    EXPECT_EQ(t->vocab_size(), 128256);
    EXPECT_EQ(t->TokenText(128009), "<|eot_id|>");
    EXPECT_EQ(t->TokenId("<|eot_id|>"), 128009);
    EXPECT_TRUE(t->IsSpecial(128009));
    EXPECT_EQ(t->TokenBytes(t->TokenId("\xC4\xA0hello")), " hello");
    // parse_special=false: special text stays text.
    EXPECT_EQ(t->Encode("<|eot_id|>", false, true), (std::vector<int32_t>{128009}));
    const auto plain = t->Encode("<|eot_id|>", false, false);
    EXPECT_GT(plain.size(), 1u);
    EXPECT_EQ(t->Decode(plain), "<|eot_id|>");
  }
  if (const Tokenizer* t = testing_util::HfTokenizer("qwen3")) {
    EXPECT_EQ(t->bos_id(), -1);
    EXPECT_EQ(t->eos_id(), 151645);
    EXPECT_TRUE(t->IsEog(151645) && t->IsEog(151643));
    // Non-special added tokens are matched even when special parsing is off.
    EXPECT_EQ(t->Encode("<think>", false, false), (std::vector<int32_t>{t->TokenId("<think>")}));
  }
  if (const Tokenizer* t = testing_util::GgufTokenizer("vocab/ggml-vocab-phi-3.gguf")) {
    EXPECT_EQ(t->eos_id(), 32000);
    EXPECT_TRUE(t->chat_template().has_value());
    EXPECT_TRUE(t->IsEog(32007));  // <|end|>
  }
}

void ExpectError(std::string_view json, const std::string& needle) {
  auto tok = Tokenizer::FromHfJson(json, "", "bad.json");
  ASSERT_FALSE(tok.ok()) << json;
  EXPECT_NE(tok.status().message().find(needle), std::string::npos) << tok.status().message();
  EXPECT_NE(tok.status().message().find("bad.json"), std::string::npos) << tok.status().message();
}

TEST(Malformed, HfJsonErrorsNameTheProblem) {
  ExpectError("{not json", "JSON");
  ExpectError("[]", "object");
  ExpectError("{}", "model");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a c"]}})", "'c'");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})", "'ab'");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [1]}})", "merges[0]");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {"a": -4}, "merges": []}})", "model.vocab");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})", "model.vocab");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}}})", "model.merges");
  ExpectError(R"({"model": {"type": "Unigram", "vocab": []}})", "Unigram");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
                 "normalizer": {"type": "Precompiled"}})", "Precompiled");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
                 "pre_tokenizer": {"type": "UnicodeScripts"}})", "UnicodeScripts");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
                 "decoder": {"type": "CTC"}})", "CTC");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
                 "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(("}, "behavior": "Isolated"}})",
              "pre_tokenizer");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
                 "added_tokens": [{"content": "x"}]})", "added_tokens[0]");
}

TEST(Malformed, Files) {
  auto r = Tokenizer::FromFile("/nonexistent/tokenizer.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  r = Tokenizer::FromFile("/");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tokenizer.json"), std::string::npos);
}

Result<std::unique_ptr<Tokenizer>> FromWriter(const gguf::GgufWriter& w) {
  static std::vector<std::string> keep;  // the parsed file points into the buffer
  keep.push_back(w.Serialize());
  const std::string& bytes = keep.back();
  ASSIGN_OR_RETURN(auto f, gguf::GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                 bytes.size(), "test.gguf"));
  return Tokenizer::FromGguf(f);
}

TEST(Malformed, GgufErrorsNameTheKey) {
  gguf::GgufWriter w;
  auto r = FromWriter(w);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tokenizer.ggml.model"), std::string::npos);
  w.Set("tokenizer.ggml.model", gguf::Value::String("t5"));
  r = FromWriter(w);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("t5"), std::string::npos);
  w.Set("tokenizer.ggml.model", gguf::Value::String("gpt2"));
  r = FromWriter(w);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tokenizer.ggml.tokens"), std::string::npos);
  w.Set("tokenizer.ggml.tokens", gguf::Value::StringArray({"a", "b", "ab"}));
  w.Set("tokenizer.ggml.token_type", gguf::Value::Int32Array({1, 1}));
  r = FromWriter(w);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("token_type"), std::string::npos);
  w.Set("tokenizer.ggml.token_type", gguf::Value::Int32Array({1, 1, 1}));
  w.Set("tokenizer.ggml.merges", gguf::Value::StringArray({"a c"}));
  r = FromWriter(w);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'c'"), std::string::npos) << r.status().message();
  w.Set("tokenizer.ggml.merges", gguf::Value::StringArray({"a b"}));
  w.Set("tokenizer.ggml.pre", gguf::Value::String("no-such-pre"));
  r = FromWriter(w);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-pre"), std::string::npos);
  w.Set("tokenizer.ggml.pre", gguf::Value::String("gpt-2"));
  r = FromWriter(w);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->Encode("ab", false), (std::vector<int32_t>{2}));
  w.Set("tokenizer.ggml.model", gguf::Value::String("llama"));
  w.Set("tokenizer.ggml.scores", gguf::Value::Float32Array({0}));
  r = FromWriter(w);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tokenizer.ggml.scores"), std::string::npos);
}

// tokenizer_config.json's chat_template list with a non-string name: skipped, not a throw.
TEST(HfJson, ChatTemplateListWithOddNames) {
  auto tok = Tokenizer::FromHfJson(
      kMetaspaceJson,
      R"({"chat_template": [{"name": 7, "template": "N"}, {"name": "default", "template": "D"}]})",
      "ms.json");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->chat_template().value_or(""), "D");
}

// A GGUF whose byte tokens are misspelled ("<0xZZ>", "<0x-1>", "<0x 1>") loads; those tokens
// are ordinary text to TokenBytes, Decode and the incremental detokenizer (no throw).
TEST(Malformed, ByteTokenSpellingsAreTextNotAThrow) {
  gguf::GgufWriter w;
  w.Set("tokenizer.ggml.model", gguf::Value::String("llama"));
  w.Set("tokenizer.ggml.tokens", gguf::Value::StringArray({"<unk>", "<s>", "</s>", "<0x41>",
                                                           "<0xZZ>", "<0x-1>", "<0x 1>", "a"}));
  w.Set("tokenizer.ggml.token_type", gguf::Value::Int32Array({2, 3, 3, 6, 6, 6, 6, 1}));
  w.Set("tokenizer.ggml.scores", gguf::Value::Float32Array({0, 0, 0, 0, 0, 0, 0, -1}));
  auto r = FromWriter(w);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tokenizer& tok = **r;
  EXPECT_EQ(tok.TokenBytes(3), "A");
  EXPECT_EQ(tok.TokenBytes(4), "<0xZZ>");
  EXPECT_EQ(tok.TokenBytes(5), "<0x-1>");
  EXPECT_EQ(tok.TokenBytes(6), "<0x 1>");
  EXPECT_EQ(tok.Decode({3, 4}, false), "A<0xZZ>");
  IncrementalDetokenizer detok(tok, /*skip_special=*/true);
  std::string streamed;
  for (int32_t id : {4, 3, 5, 7}) streamed += detok.Push(id);
  streamed += detok.Flush();
  EXPECT_EQ(streamed, tok.Decode({4, 3, 5, 7}, true));
  EXPECT_NE(streamed.find("<0x-1>"), std::string::npos) << streamed;
  EXPECT_EQ(ParseByteToken("<0xfF>"), 0xFF);
  EXPECT_EQ(ParseByteToken("<0x0>"), -1);
  EXPECT_EQ(ParseByteToken("<0xG0>"), -1);
  EXPECT_EQ(ParseByteToken("[0x41>"), -1);
}

}  // namespace
}  // namespace tachyon::tokenizer
