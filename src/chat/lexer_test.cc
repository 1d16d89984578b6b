#include "chat/lexer.h"

#include <gtest/gtest.h>

#include "chat/test_util.h"

namespace tachyon::chat {
namespace {

using testing::Render;

std::string Types(std::string_view src) {
  auto toks = Tokenize(src);
  if (!toks.ok()) return "ERROR";
  std::string out;
  for (const Token& t : *toks) {
    switch (t.type) {
      case TokenType::kText:
        out += "T(" + t.value + ")";
        break;
      case TokenType::kVarBegin:
        out += "{{";
        break;
      case TokenType::kVarEnd:
        out += "}}";
        break;
      case TokenType::kBlockBegin:
        out += "{%";
        break;
      case TokenType::kBlockEnd:
        out += "%}";
        break;
      case TokenType::kName:
        out += "N(" + t.value + ")";
        break;
      case TokenType::kString:
        out += "S(" + t.value + ")";
        break;
      case TokenType::kInt:
        out += "I(" + std::to_string(t.int_value) + ")";
        break;
      case TokenType::kFloat:
        out += "F(" + t.value + ")";
        break;
      case TokenType::kOp:
        out += "O(" + t.value + ")";
        break;
      case TokenType::kEof:
        out += "$";
        break;
    }
  }
  return out;
}

TEST(Lexer, TokensOfEachKind) {
  EXPECT_EQ(Types("a{{ x.y[0] + 1.5 // 2 ** 'q' }}b"),
            "T(a){{N(x)O(.)N(y)O([)I(0)O(])O(+)F(1.5)O(//)I(2)O(**)S(q)}}T(b)$");
  EXPECT_EQ(Types("{% if a != b %}"), "{%N(if)N(a)O(!=)N(b)%}$");
  EXPECT_EQ(Types("{{ 1_000 }}{{ 0x1F }}{{ 1e3 }}"), "{{I(1000)}}{{I(31)}}{{F(1e3)}}$");
}

TEST(Lexer, StringEscapes) {
  EXPECT_EQ(Types(R"({{ "a\nb\t\"c\u00e9\x41" }})"),
            "{{S(a\nb\t\"c\xc3\xa9"
            "A)}}$");
  EXPECT_EQ(Types(R"({{ 'it\'s' }})"), "{{S(it's)}}$");
  EXPECT_EQ(Types(R"({{ '\q' }})"), "{{S(\\q)}}$");
}

TEST(Lexer, DictBracesDoNotCloseTheTag) {
  EXPECT_EQ(Types("{{ {'a': {'b': 1}} }}"), "{{O({)S(a)O(:)O({)S(b)O(:)I(1)O(})O(})}}$");
}

TEST(Lexer, CommentsAndRaw) {
  EXPECT_EQ(Render("a{# hidden {{ x }} #}b"), "ab");
  EXPECT_EQ(Render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
  EXPECT_EQ(Render("a\n  {%- raw -%}  {{ y }}  {%- endraw %}\nz"), "a{{ y }}z");
}

TEST(Lexer, WhitespaceControl) {
  EXPECT_EQ(Render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(Render("a\n\n{%- if true -%}\n\nb{% endif %}"), "ab");
  EXPECT_EQ(Render("a {#- c -#} b"), "ab");
}

TEST(Lexer, TrimBlocksAndLstripBlocks) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indent before it.
  EXPECT_EQ(Render("{% if true %}\n  x\n  {% endif %}\ny"), "  x\ny");
  EXPECT_EQ(Render("  {% if true %}x{% endif %}"), "x");
  // Not after text on the same line, nor before variables.
  EXPECT_EQ(Render("a  {% if true %}x{% endif %}"), "a  x");
  EXPECT_EQ(Render("  {{ 'v' }}\n"), "  v");
  // `+` disables lstrip / trim.
  EXPECT_EQ(Render("  {%+ if true %}x{% endif +%}\ny"), "  x\ny");
  // Comments are trimmed like blocks.
  EXPECT_EQ(Render("  {# c #}\nx"), "x");
}

TEST(Lexer, TrailingNewlineAndCrLf) {
  EXPECT_EQ(Render("abc\n"), "abc");
  EXPECT_EQ(Render("abc\n\n"), "abc\n");
  EXPECT_EQ(Render("a\r\nb"), "a\nb");
}

TEST(Lexer, Errors) {
  EXPECT_EQ(Types("{{ 'abc }}"), "ERROR");
  EXPECT_EQ(Types("{{ x "), "ERROR");
  EXPECT_EQ(Types("{# never closed"), "ERROR");
  EXPECT_EQ(Types("{{ a $ b }}"), "ERROR");
  EXPECT_EQ(Types("{% raw %} no end"), "ERROR");
  EXPECT_EQ(Types("{{ 99999999999999999999 }}"), "ERROR");
  EXPECT_NE(Render("{{ x").find("line 1"), std::string::npos);
}

}  // namespace
}  // namespace tachyon::chat
