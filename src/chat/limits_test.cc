// Hostile templates fail with a clear error instead of hanging or exhausting memory.
#include <gtest/gtest.h>

#include "chat/test_util.h"

namespace tachyon::chat {
namespace {

using testing::Render;
using testing::RenderStatus;

TEST(Limits, InfiniteRecursionIsBounded) {
  Status st = RenderStatus("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("recursion"), std::string::npos) << st.message();
}

TEST(Limits, ExponentialMacroCallsAreBounded) {
  RenderOptions opt;
  opt.limits.max_steps = 20000;
  Status st = RenderStatus(
      "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
      "{{ f(60) }}",
      "{}", opt);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
}

TEST(Limits, LoopIterationsAreBounded) {
  RenderOptions opt;
  opt.limits.max_steps = 50000;
  Status st = RenderStatus(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "{}",
      opt);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  EXPECT_EQ(Render("{{ range(1000000) }}"),
            "ERROR: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
}

TEST(Limits, OutputAndValueSizesAreBounded) {
  RenderOptions opt;
  opt.limits.max_output_bytes = 1 << 16;
  EXPECT_EQ(RenderStatus("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", "{}", opt).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(RenderStatus("{{ 'x' * 1000000000000 }}", "{}", opt).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(RenderStatus("{{ [1] * 1000000000000 }}", "{}", opt).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(RenderStatus("{% set ns = namespace(s='ab') %}{% for i in range(100) %}"
                         "{% set ns.s = ns.s + ns.s %}{% endfor %}",
                         "{}", opt)
                .code(),
            StatusCode::kResourceExhausted);
}

TEST(Limits, DeepOrCyclicValuesDoNotCrash) {
  // A namespace that contains itself prints with a depth error, not a stack overflow.
  Status st = RenderStatus("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  EXPECT_FALSE(st.ok());
  // Deeply nested lists built in a loop.
  st = RenderStatus(
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
      "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|tojson }}");
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  st = RenderStatus(
      "{% set ns = namespace(x={}) %}{% for i in range(100000) %}"
      "{% set ns.x = {'k': ns.x} %}{% endfor %}");
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  nlohmann::ordered_json deep = nlohmann::ordered_json::array();
  for (int i = 0; i < 400; ++i) deep = nlohmann::ordered_json::array({deep});
  auto t = ChatTemplate::Parse("{{ x }}");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->Render(nlohmann::ordered_json{{"x", deep}}).ok());
}

TEST(Limits, DeepNestingInsideRecursionHitsTheStackGuard) {
  // 150 nested ifs inside a macro recursing 200 deep: bounded by the stack guard.
  std::string body;
  for (int i = 0; i < 150; ++i) body += "{% if true %}";
  body += "{{ f(n + 1) }}";
  for (int i = 0; i < 150; ++i) body += "{% endif %}";
  Status st = RenderStatus("{% macro f(n) %}" + body + "{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
}

TEST(Limits, ContextMustBeAnObject) {
  auto t = ChatTemplate::Parse("x");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->Render(nlohmann::ordered_json::array()).ok());
}

}  // namespace
}  // namespace tachyon::chat
