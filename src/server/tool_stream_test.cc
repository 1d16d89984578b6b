#include "server/tool_stream.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tachyon::server {
namespace {

struct StreamedCalls {
  std::string content;
  std::vector<std::string> names;
  std::vector<std::string> ids;
  std::vector<std::string> arguments;  // concatenated deltas per call
};

void Add(StreamedCalls& out, ToolCallStream::Output o) {
  out.content += o.content;
  for (const ToolCallDelta& d : o.deltas) {
    if (d.start) {
      EXPECT_EQ(d.index, static_cast<int>(out.names.size()));
      EXPECT_TRUE(d.arguments.empty());
      out.names.push_back(d.name);
      out.ids.push_back(d.id);
      out.arguments.emplace_back();
    }
    ASSERT_LT(d.index, static_cast<int>(out.arguments.size()));
    out.arguments[d.index] += d.arguments;
  }
}

StreamedCalls Collect(ToolCallStream& s, const std::vector<std::string_view>& pieces) {
  StreamedCalls out;
  for (std::string_view p : pieces) Add(out, s.Push(p));
  Add(out, s.Finish());
  return out;
}

// Text as the tool grammars produce it, after ForcedToolCallPrefix(format, "").
const char* const kHermes =
    "get_weather\", \"arguments\": {\"city\": \"Paris {x} \\\"y\\\"\",\n  \"days\": [1, 2]}}\n"
    "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
const char* const kLlama3 = "f\\u00e9\", \"parameters\": { \"a\" : { \"b\" : null } }}";
const char* const kMistral =
    "a\", \"arguments\": {\"k\": \"}\"}}, {\"name\": \"b\", \"arguments\": {\"z\": true}}]";
// tool_choice auto: content, then the trigger and the calls.
const char* const kAuto =
    "Let me <look>.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"<tool_call>\"}}\n"
    "</tool_call>";

struct Case {
  std::string trigger;
  std::string text;
};

// However the text is split (at every byte boundary, and byte by byte), the argument deltas
// concatenate to the non-streamed arguments, which are the minified JSON objects.
TEST(ToolCallStreamTest, DeltasConcatenateToTheWholeArgumentsAtEveryByteBoundary) {
  const std::vector<Case> cases = {{"", kHermes},
                                   {"", kLlama3},
                                   {"", kMistral},
                                   {"<tool_call>", kAuto},
                                   {"{\"name\": \"", std::string("Sure. {\"name\": \"") + kLlama3}};
  for (const Case& c : cases) {
    const std::string& t = c.text;
    ToolCallStream whole(c.trigger);
    StreamedCalls w = Collect(whole, {t});
    ASSERT_FALSE(whole.calls().empty()) << t;
    for (size_t i = 0; i < whole.calls().size(); ++i) {
      EXPECT_EQ(w.arguments[i], whole.calls()[i].arguments);
      EXPECT_EQ(w.names[i], whole.calls()[i].name);
      EXPECT_EQ(w.ids[i], whole.calls()[i].id);
      EXPECT_TRUE(nlohmann::json::parse(whole.calls()[i].arguments).is_object());
    }
    for (size_t cut = 0; cut <= t.size(); ++cut) {
      ToolCallStream s(c.trigger);
      StreamedCalls split =
          Collect(s, {std::string_view(t).substr(0, cut), std::string_view(t).substr(cut)});
      EXPECT_EQ(split.content, w.content) << cut;
      EXPECT_EQ(split.names, w.names) << cut;
      EXPECT_EQ(split.arguments, w.arguments) << "split at " << cut << " of " << t;
    }
    ToolCallStream bytes(c.trigger);
    std::vector<std::string_view> one_by_one;
    for (size_t i = 0; i < t.size(); ++i) one_by_one.push_back(std::string_view(t).substr(i, 1));
    StreamedCalls b = Collect(bytes, one_by_one);
    EXPECT_EQ(b.arguments, w.arguments);
    EXPECT_EQ(b.content, w.content);
  }
}

TEST(ToolCallStreamTest, NamesArgumentsContentAndLimits) {
  ToolCallStream s;
  Collect(s, {kHermes});
  ASSERT_EQ(s.calls().size(), 2u);
  EXPECT_EQ(s.calls()[0].name, "get_weather");
  EXPECT_EQ(s.calls()[0].arguments, R"({"city":"Paris {x} \"y\"","days":[1,2]})");
  EXPECT_EQ(s.calls()[1].name, "get_time");
  EXPECT_EQ(s.calls()[1].arguments, "{}");
  EXPECT_NE(s.calls()[0].id, s.calls()[1].id);
  EXPECT_EQ(s.calls()[0].id.rfind("call_", 0), 0u);

  ToolCallStream l;
  Collect(l, {kLlama3});
  ASSERT_EQ(l.calls().size(), 1u);
  EXPECT_EQ(l.calls()[0].name, "f\xc3\xa9");  // the JSON escape decoded
  EXPECT_EQ(l.calls()[0].arguments, R"({"a":{"b":null}})");

  ToolCallStream one("", /*max_calls=*/1);
  StreamedCalls o = Collect(one, {kMistral});
  ASSERT_EQ(one.calls().size(), 1u);
  EXPECT_EQ(o.names, std::vector<std::string>{"a"});
  EXPECT_EQ(one.calls()[0].arguments, R"({"k":"}"})");

  ToolCallStream a("<tool_call>");
  StreamedCalls as = Collect(a, {kAuto});
  EXPECT_EQ(as.content, "Let me <look>.");
  ASSERT_EQ(a.calls().size(), 1u);
  EXPECT_EQ(a.calls()[0].arguments, R"({"q":"<tool_call>"})");

  // No trigger: everything is content, a partial trigger at the end included.
  ToolCallStream none("<tool_call>");
  EXPECT_EQ(Collect(none, {"plain <tool_", "ca"}).content, "plain <tool_ca");
  EXPECT_TRUE(none.calls().empty());

  // Cut short (max_tokens): the started call keeps what was generated.
  ToolCallStream cut;
  Collect(cut, {"get_weather\", \"arguments\": {\"city\": \"Pa"});
  ASSERT_EQ(cut.calls().size(), 1u);
  EXPECT_EQ(cut.calls()[0].arguments, R"({"city":"Pa)");
}

ReasoningSplit::Output Split(const std::vector<std::string_view>& pieces) {
  ReasoningSplit s;
  ReasoningSplit::Output all;
  for (std::string_view p : pieces) {
    ReasoningSplit::Output o = s.Push(p);
    all.reasoning += o.reasoning;
    all.answer += o.answer;
  }
  ReasoningSplit::Output o = s.Finish();
  all.reasoning += o.reasoning;
  all.answer += o.answer;
  return all;
}

TEST(ReasoningSplitTest, SplitsAtEveryByteBoundary) {
  const std::string t = "<think>\nfirst <b> then </th\n</think>\n\n{\"a\": \" </think>\"}";
  for (size_t cut = 0; cut <= t.size(); ++cut) {
    auto o = Split({std::string_view(t).substr(0, cut), std::string_view(t).substr(cut)});
    EXPECT_EQ(o.reasoning, "first <b> then </th") << cut;
    EXPECT_EQ(o.answer, "{\"a\": \" </think>\"}") << cut;
  }
  EXPECT_EQ(Split({"no tags, all reasoning  "}).reasoning, "no tags, all reasoning  ");
  EXPECT_EQ(Split({"<thi"}).reasoning, "<thi");
  auto no_open = Split({"plan</think>answer"});
  EXPECT_EQ(no_open.reasoning, "plan");
  EXPECT_EQ(no_open.answer, "answer");
}

}  // namespace
}  // namespace tachyon::server
