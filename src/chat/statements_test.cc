// Statements: if, for (+ loop object), set, namespace, macro, call, filter, with, generation.
#include <gtest/gtest.h>

#include "chat/test_util.h"

namespace tachyon::chat {
namespace {

using testing::Render;

TEST(Statements, IfElifElse) {
  const char* t = "{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %}";
  EXPECT_EQ(Render(t, R"({"x":1})"), "one");
  EXPECT_EQ(Render(t, R"({"x":2})"), "two");
  EXPECT_EQ(Render(t, R"({"x":3})"), "many");
  EXPECT_EQ(Render("{% if undefined_thing %}y{% else %}n{% endif %}"), "n");
}

TEST(Statements, ForLoopVariables) {
  EXPECT_EQ(Render("{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};"
                   "{% endfor %}",
                   R"({"l":["a","b"]})"),
            "1021TrueFalse2;2110FalseTrue2;");
  EXPECT_EQ(Render("{% for x in l %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}",
                   R"({"l":[1,2,3]})"),
            "-2|1-3|2-|");
  EXPECT_EQ(Render("{% for x in l %}{{ loop.cycle('a', 'b') }}{% endfor %}", R"({"l":[1,2,3]})"),
            "aba");
  EXPECT_EQ(Render("{% for x in l %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}",
                   R"({"l":[1,1,2,2,1]})"),
            "121");
}

TEST(Statements, ForVariants) {
  EXPECT_EQ(
      Render("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", R"({"d":{"b":1,"a":2}})"),
      "b=1,a=2,");
  EXPECT_EQ(Render("{% for k in d %}{{ k }}{% endfor %}", R"({"d":{"b":1,"a":2}})"), "ba");
  EXPECT_EQ(Render("{% for c in 'héllo' %}{{ c }}.{% endfor %}"), "h.é.l.l.o.");
  EXPECT_EQ(Render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(
      Render("{% for x in l if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}", R"({"l":[1,2,3]})"),
      "2232");
  EXPECT_EQ(Render("{% for x in l %}{% if x == 2 %}{% continue %}{% endif %}"
                   "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
                   R"({"l":[1,2,3,4,5]})"),
            "13");
  EXPECT_EQ(Render("{% for x in missing %}x{% endfor %}"), "");
  EXPECT_EQ(Render("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}"), "37");
  EXPECT_EQ(Render("{% for x in none %}{% endfor %}"), "ERROR: 'NoneType' object is not iterable");
  EXPECT_EQ(Render("{% for a, b in [[1]] %}{% endfor %}"),
            "ERROR: not enough values to unpack (expected 2, got 1)");
}

TEST(Statements, RecursiveLoop) {
  EXPECT_EQ(
      Render("{% for n in tree recursive %}{{ n.name }}{% if n.kids %}({{ loop(n.kids) }})"
             "{% endif %}{% endfor %}",
             R"({"tree":[{"name":"a","kids":[{"name":"b"},{"name":"c","kids":[{"name":"d"}]}]}]})"),
      "a(bc(d))");
}

TEST(Statements, LoopScoping) {
  // set inside a loop iteration does not leak out, nor into the next iteration.
  EXPECT_EQ(Render("{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}"
                   "{{ x }}"),
            "01020");
  EXPECT_EQ(Render("{% set ns = namespace(total=0, items=[]) %}{% for i in [1, 2, 3] %}"
                   "{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}"),
            "6");
  // if blocks share the enclosing scope.
  EXPECT_EQ(Render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
}

TEST(Statements, SetForms) {
  EXPECT_EQ(Render("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(Render("{% set x %}hello {{ 'w' }}{% endset %}[{{ x }}]"), "[hello w]");
  EXPECT_EQ(Render("{% set x | upper | trim %}  ab {% endset %}[{{ x }}]"), "[AB]");
  EXPECT_EQ(Render("{% set ns = namespace() %}{% set ns.a = 1 %}{{ ns.a }}{{ ns.b }}"), "1");
  EXPECT_EQ(Render("{% set d = {} %}{% set d.a = 1 %}"),
            "ERROR: cannot assign attribute on non-namespace object");
}

TEST(Statements, Macros) {
  EXPECT_EQ(Render("{% macro greet(name, greeting='Hi') %}{{ greeting }} {{ name }}{% endmacro %}"
                   "{{ greet('A') }}|{{ greet('B', 'Yo') }}|{{ greet(greeting='Hey', name='C') }}"),
            "Hi A|Yo B|Hey C");
  EXPECT_EQ(Render("{% macro m(a) %}[{{ a }}]{{ varargs }}{{ kwargs }}{% endmacro %}"
                   "{{ m(1, 2, z=3) }}"),
            "[1](2,){'z': 3}");
  EXPECT_EQ(Render("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}"
                   "{% endif %}{% endmacro %}{{ fact(5) }}"),
            "120");
  EXPECT_EQ(Render("{% macro m(x) %}{{ x is defined }}{% endmacro %}{{ m() }}"), "False");
  // Macros see variables of their defining scope.
  EXPECT_EQ(Render("{% set g = 'G' %}{% macro m() %}{{ g }}{% endmacro %}{{ m() }}"), "G");
}

TEST(Statements, CallBlocks) {
  EXPECT_EQ(Render("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
                   "{% call wrap('b') %}bold{% endcall %}"),
            "<b>bold</b>");
  EXPECT_EQ(Render("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                   "{% call(item) each([1, 2]) %}<{{ item }}>{% endcall %}"),
            "<1><2>");
}

TEST(Statements, FilterWithGeneration) {
  EXPECT_EQ(Render("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
  EXPECT_EQ(Render("{% filter replace('a', 'b') | upper %}aa{% endfilter %}"), "BB");
  EXPECT_EQ(Render("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}"), "3");
  EXPECT_EQ(Render("x{% generation %}gen {{ 1 }}{% endgeneration %}y"), "xgen 1y");
}

TEST(Statements, GlobalsAndContext) {
  EXPECT_EQ(Render("{{ range(3) }}{{ range(1, 7, 2) }}{{ range(3, 0, -1) }}"),
            "[0, 1, 2][1, 3, 5][3, 2, 1]");
  EXPECT_EQ(Render("{{ dict(a=1, b='x') }}"), "{'a': 1, 'b': 'x'}");
  EXPECT_EQ(Render("{{ raise_exception('Bad role: ' ~ r) }}", R"({"r":"x"})"),
            "ERROR: Bad role: x");
  RenderOptions opt;
  opt.clock = [] { return std::time_t(1768435200); };  // 2026-01-15 00:00:00 UTC
  opt.clock_is_utc = true;
  EXPECT_EQ(Render("{{ strftime_now('%d %b %Y') }}", "{}", opt), "15 Jan 2026");
  EXPECT_EQ(Render("{{ x }}|{{ x is defined }}"), "|False");
  EXPECT_EQ(Render("{{ x.y is defined }}"), "ERROR: 'x' is undefined");
}

}  // namespace
}  // namespace tachyon::chat
