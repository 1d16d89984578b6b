#include "chat/parser.h"

#include <gtest/gtest.h>

#include "chat/test_util.h"

namespace tachyon::chat {
namespace {

using testing::Render;

TEST(Parser, Precedence) {
  EXPECT_EQ(Render("{{ 1 + 2 * 3 }}"), "7");
  EXPECT_EQ(Render("{{ (1 + 2) * 3 }}"), "9");
  EXPECT_EQ(Render("{{ 2 ** 3 ** 2 }}"), "64");  // Jinja's ** is left-associative
  EXPECT_EQ(Render("{{ -2 ** 2 }}"), "4");
  EXPECT_EQ(Render("{{ 2 * 3 ~ 4 }}"), "64");
  EXPECT_EQ(Render("{{ 1 ~ 2 + 3 }}"), "ERROR: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(Render("{{ not 1 == 2 }}"), "True");
  EXPECT_EQ(Render("{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}"), "TrueFalse");
  EXPECT_EQ(Render("{{ 'a' if false }}|{{ 'a' if 0 else 'b' if 1 else 'c' }}"), "|b");
  EXPECT_EQ(Render("{{ -3|abs }}"), "3");
  EXPECT_EQ(Render("{{ not x is defined }}"), "True");
  EXPECT_EQ(Render("{{ 1 in [1] and 2 not in [1] }}"), "True");
}

TEST(Parser, Literals) {
  EXPECT_EQ(Render("{{ [1, 'a', none, true, False, 1.5] }}"), "[1, 'a', None, True, False, 1.5]");
  EXPECT_EQ(Render("{{ {'a': 1, 'b': [2]} }}"), "{'a': 1, 'b': [2]}");
  EXPECT_EQ(Render("{{ (1, 2) }}{{ (1,) }}{{ () }}"), "(1, 2)(1,)()");
  EXPECT_EQ(Render("{{ 'a' 'b' }}"), "ab");
  EXPECT_EQ(Render("{{ [1, 2,] }}"), "[1, 2]");
  EXPECT_EQ(Render("{{ 1, 2 }}"), "(1, 2)");
}

TEST(Parser, PostfixAndCalls) {
  EXPECT_EQ(Render("{{ x.a.b }}{{ x['a']['b'] }}{{ l.1 }}", R"({"x":{"a":{"b":7}},"l":[5,6]})"),
            "776");
  EXPECT_EQ(Render("{{ 'abc'.upper() }}{{ 'a-b'.split('-')[1] }}"), "ABCb");
  EXPECT_EQ(Render("{{ l[1:] }}{{ l[::-1] }}{{ l[-2] }}", R"({"l":[1,2,3]})"), "[2, 3][3, 2, 1]2");
  EXPECT_EQ(Render("{{ x is divisibleby 3 }}{{ x is divisibleby(2) }}", R"({"x":9})"), "TrueFalse");
  EXPECT_EQ(Render("{{ 'ab' | replace('a', 'x') | upper }}"), "XB");
}

TEST(Parser, SyntaxErrors) {
  for (const char* bad :
       {"{% if x %}", "{% for x in y %}", "{% endif %}", "{{ 1 + }}", "{% set %}",
        "{% macro m( %}{% endmacro %}", "{% foo %}", "{{ x is }}",
        "{% if x %}{% else %}{% else %}{% endif %}", "{{ (1 }}", "{{ [1 }}", "{{ {1: } }}",
        "{% break %}", "{% include 'x' %}", "{{ a[1:2:3:4] }}", "{{ f(a=1, 2) }}"}) {
    auto t = ChatTemplate::Parse(bad);
    EXPECT_FALSE(t.ok()) << bad;
    if (!t.ok()) {
      EXPECT_EQ(t.status().message().rfind("line ", 0), 0u) << t.status().message();
    }
  }
  EXPECT_NE(Render("x\n\n{% foo %}").find("line 3: Encountered unknown tag 'foo'."),
            std::string::npos);
}

TEST(Parser, DeepNestingIsRejectedNotCrashing) {
  std::string deep(5000, '(');
  EXPECT_FALSE(ChatTemplate::Parse("{{ " + deep + "1" + std::string(5000, ')') + " }}").ok());
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_FALSE(ChatTemplate::Parse(chain + " }}").ok());
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  EXPECT_FALSE(ChatTemplate::Parse(ifs).ok());
  std::string nots = "{{ " + std::string(0, ' ');
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_FALSE(ChatTemplate::Parse(nots + "1 }}").ok());
}

}  // namespace
}  // namespace tachyon::chat
