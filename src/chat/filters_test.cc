#include <gtest/gtest.h>

#include "chat/test_util.h"

namespace tachyon::chat {
namespace {

using testing::Render;

TEST(Filters, Tojson) {
  const char* ctx = R"({"x":{"b":1,"a":[1.0,true,null,"é\n\"q\""],"c":{}}})";
  EXPECT_EQ(Render("{{ x|tojson }}", ctx),
            R"({"b": 1, "a": [1.0, true, null, "é\n\"q\""], "c": {}})");
  EXPECT_EQ(Render("{{ x|tojson(indent=2) }}", ctx),
            "{\n  \"b\": 1,\n  \"a\": [\n    1.0,\n    true,\n    null,\n    \"é\\n\\\"q\\\"\"\n"
            "  ],\n  \"c\": {}\n}");
  EXPECT_EQ(
      Render("{{ x|tojson(sort_keys=true, separators=(',', ':')) }}", R"({"x":{"b":1,"a":2}})"),
      R"({"a":2,"b":1})");
  EXPECT_EQ(Render("{{ 'é<'|tojson(ensure_ascii=true) }}"), "\"\\u00e9<\"");
  EXPECT_EQ(Render("{{ undefined_var|tojson }}"),
            "ERROR: Object of type Undefined is not JSON serializable");
}

TEST(Filters, StringFilters) {
  EXPECT_EQ(Render("[{{ '  a b \n'|trim }}]{{ 'xxaxx'|trim('x') }}"), "[a b]a");
  EXPECT_EQ(Render("{{ 'hello wORLD'|capitalize }}|{{ 'hello wORLD-x'|title }}"),
            "Hello world|Hello World-X");
  EXPECT_EQ(Render("{{ 'aXb'|upper }}{{ 'aXb'|lower }}{{ 'Ä'|lower }}"), "AXBaxbä");
  EXPECT_EQ(Render("{{ 'aaa'|replace('a', 'b', 2) }}"), "bba");
  EXPECT_EQ(Render("{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}"),
            "a\n  b\n\n  c|  a\n  b");
  EXPECT_EQ(Render("{{ 'a\n\nb'|indent(width='>', blank=true) }}"), "a\n>\n>b");
  EXPECT_EQ(Render("{{ 'one two  three'|wordcount }}"), "3");
  EXPECT_EQ(Render("[{{ 'ab'|center(6) }}]"), "[  ab  ]");
  EXPECT_EQ(Render("{{ 'foo bar baz qux'|truncate(9) }}|{{ 'foo bar baz qux'|truncate(9, true) }}"
                   "|{{ 'foo bar baz qux'|truncate(11, false, '..', 0) }}"),
            "foo...|foo ba...|foo bar..");
  EXPECT_EQ(Render("{{ '<a & \"b\">'|e }}{{ '<x>'|escape|escape }}"),
            "&lt;a &amp; &#34;b&#34;&gt;&lt;x&gt;");
  EXPECT_EQ(Render("{{ 3|string ~ none|string }}"), "3None");
  // Markup (|safe) escapes the plain side of `+`, not of `~`.
  EXPECT_EQ(Render("{{ '<b>'|safe + '<i>' }}|{{ '<b>'|safe ~ '<i>' }}"), "<b>&lt;i&gt;|<b><i>");
}

TEST(Filters, Conversions) {
  EXPECT_EQ(Render("{{ '42'|int }}{{ ' 7 '|int }}{{ '3.9'|int }}{{ 'x'|int }}{{ 'x'|int(5) }}"
                   "{{ 4.7|int }}{{ '0x1A'|int(0, 16) }}"),
            "427305426");
  EXPECT_EQ(Render("{{ '1.5'|float }} {{ 3|float }} {{ 'z'|float }}"), "1.5 3.0 0.0");
  EXPECT_EQ(Render("{{ -3|abs }}{{ -2.5|abs }}"), "32.5");
  EXPECT_EQ(Render("{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 7|round }} "
                   "{{ 2.1|round(0, 'ceil') }}"),
            "2.0 4.0 2.67 7 3.0");
  EXPECT_EQ(Render("{{ 'abc'|list }}{{ {'a': 1}|list }}"), "['a', 'b', 'c']['a']");
}

TEST(Filters, Sequences) {
  const char* ctx =
      R"({"u":[{"n":"b","a":2,"ok":true},{"n":"A","a":1},{"n":"c","a":3,"ok":false}]})";
  EXPECT_EQ(Render("{{ u|map(attribute='n')|join(',') }}", ctx), "b,A,c");
  EXPECT_EQ(Render("{{ u|selectattr('ok')|map(attribute='n')|list }}", ctx), "['b']");
  EXPECT_EQ(Render("{{ u|selectattr('ok', 'defined')|map(attribute='n')|list }}", ctx),
            "['b', 'c']");
  EXPECT_EQ(Render("{{ u|rejectattr('a', 'equalto', 1)|map(attribute='a')|list }}", ctx), "[2, 3]");
  EXPECT_EQ(Render("{{ u|sort(attribute='n')|map(attribute='n')|join }}", ctx), "Abc");
  EXPECT_EQ(Render("{{ u|sort(attribute='a', reverse=true)|map(attribute='a')|join }}", ctx),
            "321");
  EXPECT_EQ(Render("{{ [3, 1, 2]|sort }}{{ ['b', 'A', 'a']|unique|list }}"), "[1, 2, 3]['b', 'A']");
  EXPECT_EQ(Render("{{ [1, 2, 3, 4]|select('odd')|list }}{{ [1, 2, 3]|reject('even')|list }}"),
            "[1, 3][1, 3]");
  EXPECT_EQ(Render("{{ ['a', 'b']|map('upper')|join('-') }}"), "A-B");
  EXPECT_EQ(Render("{{ none|selectattr('x')|list }}{{ none|map('upper')|list }}"), "[][]");
  EXPECT_EQ(Render("{{ {'b': 1, 'a': 2}|dictsort }}{{ {'b': 1, 'a': 2}|dictsort(by='value') }}"),
            "[('a', 2), ('b', 1)][('b', 1), ('a', 2)]");
  EXPECT_EQ(Render("{{ {'x': 1}|items|list }}"), "[('x', 1)]");
  EXPECT_EQ(Render("{{ 'x'|items }}"), "ERROR: Can only get item pairs from a mapping.");
  EXPECT_EQ(Render("{{ [1, 2]|first }}{{ [1, 2]|last }}{{ []|first }}"), "12");
  EXPECT_EQ(Render("{{ [1, 2, 3]|sum }}{{ [1, 5, 3]|max }}{{ ['b', 'A']|min }}"), "65A");
  EXPECT_EQ(Render("{{ [1, 2, 3]|batch(2) }}{{ [1, 2, 3]|batch(2, 0)|last }}"),
            "[[1, 2], [3]][3, 0]");
  EXPECT_EQ(Render("{{ [1, 2]|length }}{{ 'héllo'|count }}{{ missing|length }}"), "250");
  EXPECT_EQ(Render("{{ [1, 2]|reverse|list }}{{ 'abc'|reverse }}"), "[2, 1]cba");
}

TEST(Filters, DefaultAndErrors) {
  EXPECT_EQ(Render("{{ x|default('d') }}{{ ''|default('e') }}{{ ''|default('f', true) }}"
                   "{{ none|d('g') }}{{ x|default }}"),
            "dfNone");
  EXPECT_EQ(Render("{{ 1|nope }}"), "ERROR: No filter named 'nope' found.");
  EXPECT_EQ(Render("{{ 1 is nope }}"), "ERROR: No test named 'nope' found.");
  EXPECT_EQ(Render("{{ 'a'|join(1, 2, 3) }}").rfind("ERROR", 0), 0u);
}

TEST(Tests, AllTests) {
  EXPECT_EQ(Render("{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 1 is none }}"),
            "FalseTrueTrueFalse");
  EXPECT_EQ(Render("{{ 'a' is string }}{{ 1 is number }}{{ 1.0 is number }}{{ true is number }}"),
            "TrueTrueTrueTrue");
  EXPECT_EQ(Render("{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ 1 is float }}"),
            "TrueFalseTrueFalse");
  EXPECT_EQ(
      Render("{{ {} is mapping }}{{ [] is mapping }}{{ [] is iterable }}{{ 'a' is iterable }}"
             "{{ 1 is iterable }}{{ 'a' is sequence }}{{ {} is sequence }}{{ 1 is sequence }}"),
      "TrueFalseTrueTrueFalseTrueTrueFalse");
  EXPECT_EQ(Render("{{ true is boolean }}{{ 1 is boolean }}{{ true is true }}{{ 1 is true }}"
                   "{{ false is false }}"),
            "TrueFalseTrueFalseTrue");
  EXPECT_EQ(Render("{{ 2 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 1 is eq 1 }}"
                   "{{ 1 is ne 1 }}{{ 'a' is equalto 'a' }}{{ 2 is gt 1 }}{{ 2 is lt 1 }}"
                   "{{ 2 is ge 2 }}{{ 2 is le 1 }}{{ 1 is in [1] }}"),
            "TrueTrueTrueTrueFalseTrueTrueFalseTrueFalseTrue");
  EXPECT_EQ(Render("{{ 'ab' is lower }}{{ 'AB' is upper }}{{ x is not defined }}"), "TrueTrueTrue");
  EXPECT_EQ(Render("{% macro m() %}{% endmacro %}{{ m is callable }}{{ 'upper' is filter }}"),
            "TrueTrue");
}

}  // namespace
}  // namespace tachyon::chat
