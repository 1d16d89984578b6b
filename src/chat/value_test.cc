// Python value semantics: printing, equality, ordering, arithmetic, strings, undefined.
#include "chat/value.h"

#include <gtest/gtest.h>

#include "chat/test_util.h"

namespace tachyon::chat {
namespace {

using testing::Render;

TEST(Value, PrintsLikePython) {
  EXPECT_EQ(Render("{{ none }} {{ true }} {{ 1.0 }} {{ 0.1 }} {{ 1e20 }} {{ 1.5e-7 }} {{ 10/4 }}"),
            "None True 1.0 0.1 1e+20 1.5e-07 2.5");
  EXPECT_EQ(Render("{{ 123456789012345.0 }} {{ 1e16 }} {{ 0.0001 }} {{ -0.0 }}"),
            "123456789012345.0 1e+16 0.0001 -0.0");
  EXPECT_EQ(Render("{{ {'a': 1, 'b': [none, 'x']} }}"), "{'a': 1, 'b': [None, 'x']}");
  EXPECT_EQ(Render(R"({{ ["it's", 'say "hi"', 'both \' "', 'tab\tnl\n\\'] }})"),
            R"(["it's", 'say "hi"', 'both \' "', 'tab\tnl\n\\'])");
  EXPECT_EQ(Render("{{ ['é', '\x01', '\u00a0'] }}"), "['é', '\\x01', '\\xa0']");
  EXPECT_EQ(Render("{{ x }}", R"({"x":{"k":[1,2.5,true,null]}})"), "{'k': [1, 2.5, True, None]}");
  EXPECT_EQ(Render("{{ namespace(a=1) }}"), "<Namespace {'a': 1}>");
}

TEST(Value, IntVersusFloat) {
  EXPECT_EQ(
      Render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7.0 // 2 }} {{ 2 ** 10 }}"
             " {{ 2 ** -1 }} {{ 4 / 2 }} {{ 1 + 1.0 }} {{ true + 1 }}"),
      "3 -4 1 2 3.0 1024 0.5 2.0 2.0 2");
  EXPECT_EQ(Render("{{ x }} {{ y }}", R"({"x":3,"y":3.0})"), "3 3.0");
  EXPECT_EQ(Render("{{ 1 / 0 }}"), "ERROR: division by zero");
  EXPECT_EQ(Render("{{ 9223372036854775807 + 1 }}"), "ERROR: integer overflow");
}

TEST(Value, EqualityAndOrdering) {
  EXPECT_EQ(Render("{{ 1 == 1.0 }}{{ true == 1 }}{{ 'a' == 'a' }}{{ [1] == [1] }}{{ (1,) == [1] }}"
                   "{{ {'a': 1} == {'a': 1} }}{{ none == none }}{{ x == y }}"),
            "TrueTrueTrueTrueFalseTrueTrueTrue");
  EXPECT_EQ(Render("{{ 'a' < 'b' }}{{ [1, 2] < [1, 3] }}{{ 2 >= 2.0 }}"), "TrueTrueTrue");
  EXPECT_EQ(Render("{{ 'a' < 1 }}"),
            "ERROR: '<' not supported between instances of 'str' and 'int'");
}

TEST(Value, Concatenation) {
  EXPECT_EQ(Render("{{ 'a' + 'b' }}{{ [1] + [2] }}{{ 'a' ~ 1 ~ none ~ x }}{{ 'ab' * 2 }}"),
            "ab[1, 2]a1Noneabab");
  EXPECT_EQ(Render("{{ 'a' + [1] }}"), "ERROR: can only concatenate str (not \"list\") to str");
  EXPECT_EQ(Render("{{ 'a' + none }}"),
            "ERROR: can only concatenate str (not \"NoneType\") to str");
  EXPECT_EQ(Render("{{ 1 + 'a' }}"), "ERROR: unsupported operand type(s) for +: 'int' and 'str'");
}

TEST(Value, PercentFormatting) {
  EXPECT_EQ(Render("{{ '%s=%d' % ('a', 3) }}|{{ '%5.2f' % 3.14159 }}|{{ '%-4s|' % 'x' }}"
                   "{{ '%(k)s' % {'k': 'v'} }}|{{ '%r' % 'q' }}|{{ '%x%%' % 255 }}"),
            "a=3| 3.14|x   |v|'q'|ff%");
  EXPECT_EQ(Render("{{ '%s and %s'|format('a', 'b') }}"), "a and b");
  EXPECT_EQ(Render("{{ '%s %s' % ('a',) }}"), "ERROR: not enough arguments for format string");
  EXPECT_EQ(Render("{{ '%d' % 'a' }}"), "ERROR: %d format: a real number is required, not str");
}

TEST(Value, StringMethods) {
  EXPECT_EQ(Render("[{{ '\u3000 a \n'.strip() }}][{{ '  a '.lstrip() }}][{{ ' a  '.rstrip() }}]"
                   "[{{ 'xyaxy'.strip('xy') }}]"),
            "[a][a ][ a][a]");
  EXPECT_EQ(Render("{{ ' a  b '.split() }}{{ 'a,b,,c'.split(',') }}{{ 'a,b,c'.split(',', 1) }}"
                   "{{ 'a,b,c'.rsplit(',', 1) }}{{ 'a b c'.split(none, 1) }}"),
            "['a', 'b']['a', 'b', '', 'c']['a', 'b,c']['a,b', 'c']['a', 'b c']");
  EXPECT_EQ(Render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}"
                   "{{ 'abc'.startswith('b', 1) }}"),
            "TrueTrueTrue");
  EXPECT_EQ(
      Render("{{ 'aXa'.replace('a', 'b') }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} "
             "{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ \"they're\".title() }}"),
      "bXb AB ab Hello World Hello They'Re");
  EXPECT_EQ(Render("{{ 'héllo'.find('l') }}{{ 'abc'.find('z') }}{{ 'aaa'.count('a') }}"
                   "{{ '-'.join(['a', 'b']) }}"),
            "2-13a-b");
  EXPECT_EQ(Render("{{ 'héllo'[1] }}{{ 'héllo'[-1] }}{{ 'héllo'[1:3] }}{{ 'abcdef'[::2] }}"
                   "{{ 'abc'[5:] }}|{{ 'abc'[10] }}|"),
            "éoélace||");
  EXPECT_EQ(Render("{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 5) }}{{ d.keys()|list }}"
                   "{{ d.values()|list }}",
                   R"({"d":{"a":1}})"),
            "1None5['a'][1]");
  EXPECT_EQ(
      Render("{{ 'x' in 'axb' }}{{ 1 in [1, 2] }}{{ 'a' in {'a': 1} }}{{ 'q' not in 'abc' }}"),
      "TrueTrueTrueTrue");
  EXPECT_EQ(Render("{{ 'a' in none }}"), "ERROR: argument of type 'NoneType' is not iterable");
}

TEST(Value, UndefinedIsLenient) {
  EXPECT_EQ(Render("[{{ x }}][{{ x|length }}][{% for i in x %}{% endfor %}][{{ x is defined }}]"
                   "[{{ not x }}][{{ d.missing }}][{{ l[5] }}]",
                   R"({"d":{},"l":[]})"),
            "[][0][][False][True][][]");
  EXPECT_EQ(Render("{{ x.y }}"), "ERROR: 'x' is undefined");
  EXPECT_EQ(Render("{{ d.a.b }}", R"({"d":{}})"), "ERROR: 'dict object' has no attribute 'a'");
  EXPECT_EQ(Render("{{ n[0].x }}", R"({"n":null})"), "ERROR: None has no element 0");
  EXPECT_EQ(Render("{{ s.items() }}", R"({"s":"str"})"),
            "ERROR: 'str object' has no attribute 'items'");
  EXPECT_EQ(Render("{{ x + 1 }}"), "ERROR: 'x' is undefined");
}

TEST(Value, SandboxRefusesMutation) {
  EXPECT_EQ(Render("{% set l = [] %}{{ l.append(1) }}"),
            "ERROR: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(Render("{% set d = {} %}{{ d.update({'a': 1}) }}"),
            "ERROR: access to attribute 'update' of 'dict' object is unsafe.");
  EXPECT_EQ(Render("{{ ''.__class__ }}"), "");
  EXPECT_EQ(Render("{{ ''.__class__.__mro__ }}").rfind("ERROR", 0), 0u);
}

}  // namespace
}  // namespace tachyon::chat
