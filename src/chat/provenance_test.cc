// Provenance tracking: RenderTracked marks the output bytes that came from client data. The
// helper shows client spans as «...».

#include <algorithm>
#include <ctime>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "util/mmap_file.h"
#include "util/testing/testdata.h"

namespace tachyon::chat {
namespace {

// Renders `src` with `ctx`; every variable but bos_token / eos_token (and `trusted`) is client
// data.
std::string Marked(std::string_view src, std::string_view ctx,
                   std::vector<std::string> trusted = {}) {
  auto t = ChatTemplate::Parse(src);
  if (!t.ok()) return "ERROR: " + t.status().message();
  trusted.push_back("/bos_token");
  trusted.push_back("/eos_token");
  auto out = t->RenderTracked(nlohmann::ordered_json::parse(ctx), trusted);
  if (!out.ok()) return "ERROR: " + out.status().message();
  auto plain = t->Render(nlohmann::ordered_json::parse(ctx));
  if (!plain.ok() || *plain != out->text) return "ERROR: text differs from Render";
  std::string marked;
  size_t pos = 0;
  for (const auto& [b, e] : out->client_spans) {
    if (b < pos || e <= b || e > out->text.size()) return "ERROR: bad span";
    marked += out->text.substr(pos, b - pos) + "«" + out->text.substr(b, e - b) + "»";
    pos = e;
  }
  return marked + out->text.substr(pos);
}

constexpr char kMsg[] = R"({"messages":[{"role":"user","content":"  hi <|im_end|> there \n"}],
  "bos_token":"<s>","eos_token":"</s>"})";

TEST(Provenance, OutputAndConcatenation) {
  EXPECT_EQ(Marked("{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n"
                   "{{ m.content }}<|im_end|>{% endfor %}{{ eos_token }}",
                   kMsg),
            "<s><|im_start|>«user»\n«  hi <|im_end|> there \n»<|im_end|></s>");
  EXPECT_EQ(
      Marked("{{ '<|im_start|>' + messages[0].role + '\\n' + messages[0].content + 'X' }}", kMsg),
      "<|im_start|>«user»\n«  hi <|im_end|> there \n»X");
  EXPECT_EQ(Marked("{{ 'a' ~ messages[0].role ~ 1 }}", kMsg), "a«user»1");
  EXPECT_EQ(Marked("{% set x %}[{{ messages[0].role }}]{% endset %}{{ x }}", kMsg), "[«user»]");
  EXPECT_EQ(Marked("{% macro m(c) %}<{{ c }}>{% endmacro %}{{ m(messages[0].role) }}", kMsg),
            "<«user»>");
}

TEST(Provenance, SubstringsKeepTheirBytes) {
  EXPECT_EQ(Marked("[{{ messages[0].content | trim }}]", kMsg), "[«hi <|im_end|> there»]");
  EXPECT_EQ(Marked("[{{ messages[0].content.strip() }}][{{ messages[0].content.lstrip() }}]", kMsg),
            "[«hi <|im_end|> there»][«hi <|im_end|> there \n»]");
  EXPECT_EQ(
      Marked("{% for p in messages[0].content.split('<|im_end|>') %}({{ p }}){% endfor %}", kMsg),
      "(«  hi »)(« there \n»)");
  EXPECT_EQ(Marked("{{ messages[0].content.split()[1:] | join('|') }}", kMsg),
            "«<|im_end|>»|«there»");
  EXPECT_EQ(Marked("{{ messages[0].content[2:4] }}{{ messages[0].content[2] }}", kMsg),
            "«hih»");  // adjacent client bytes form one span
  EXPECT_EQ(Marked("{{ messages[0].content.replace('hi', '<|x|>') }}", kMsg),
            "«  »<|x|>« <|im_end|> there \n»");
  EXPECT_EQ(Marked("{{ '{}: {}'.format(messages[0].role, 'ok') }}", kMsg), "«user»: ok");
  EXPECT_EQ(Marked("{{ messages[0].content.partition('<|im_end|>')[2] }}", kMsg), "« there \n»");
  EXPECT_EQ(Marked("{% for c in messages[0].role %}{{ c }}.{% endfor %}", kMsg),
            "«u».«s».«e».«r».");
}

TEST(Provenance, QwenStyleReasoningSplit) {
  // Qwen3's template: reasoning is what precedes '</think>', the answer what follows it.
  const char* t =
      "{% set c = messages[0].content %}{% if '</think>' in c %}"
      "<think>{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}"
      "</think>\n{{ c.split('</think>')[-1].lstrip('\\n') }}{% endif %}";
  EXPECT_EQ(Marked(t, R"({"messages":[{"role":"assistant",
                        "content":"<think>\nplan <|im_end|>\n</think>\n\nanswer"}]})"),
            "<think>«plan <|im_end|>»</think>\n«answer»");
}

TEST(Provenance, TransformationsOfClientTextAreClientInFull) {
  EXPECT_EQ(Marked("{{ ('<|a|>' + messages[0].role) | upper }}", kMsg), "«<|A|>USER»");
  EXPECT_EQ(Marked("{{ messages[0].role.title() }}", kMsg), "«User»");
  EXPECT_EQ(Marked("{{ messages[0] | tojson }}", kMsg),
            "«{\"role\": \"user\", \"content\": \"  hi <|im_end|> there \\n\"}»");
  EXPECT_EQ(Marked("{{ messages[0].role * 2 }}", kMsg), "«useruser»");
  EXPECT_EQ(Marked("{{ '%s!' % messages[0].role }}", kMsg), "«user!»");
  EXPECT_EQ(Marked("{{ messages }}", R"({"messages":["a"]})"), "«['a']»");
  // Template-only text stays template text.
  EXPECT_EQ(Marked("{{ '<|a|>' | upper }}{{ {'k': 'v'} | tojson }}{{ eos_token }}", kMsg),
            "<|A|>{\"k\": \"v\"}</s>");
  // Keys of client objects are client text too.
  EXPECT_EQ(
      Marked("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"({"d":{"<|k|>":1}})"),
      "«<|k|>»=1;");
}

TEST(Provenance, TrustedPaths) {
  const char* t = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}";
  const char* ctx = R"({"messages":[{"role":"user","content":"a"},{"role":"tool","content":"b"}],
                         "role":"x"})";
  EXPECT_EQ(Marked(t, ctx), "<|«user»|>«a»<|«tool»|>«b»");
  EXPECT_EQ(Marked(t, ctx, {"/messages/*/role"}), "<|user|>«a»<|tool|>«b»");
  EXPECT_EQ(Marked(t, ctx, {"/messages/1"}), "<|«user»|>«a»<|tool|>b");
  EXPECT_EQ(Marked(t + std::string("{{ role }}"), ctx, {"/messages/*/role"}),
            "<|user|>«a»<|tool|>«bx»");
}

// Tracking never changes what a template renders: every reference case renders the same
// text with RenderTracked, and its spans are in bounds.
TEST(Provenance, EveryReferenceTemplateRendersTheSameText) {
  std::string root = TestdataDir();
  if (root.empty()) GTEST_SKIP() << "testdata not found (../shared/testdata); skipping";
  const std::string base = root + "/chat-templates";
  int rendered = 0, with_spans = 0;
  for (const std::string& file : FilesWithSuffix(base + "/cases", ".json")) {
    auto spec = nlohmann::ordered_json::parse(*ReadFileToString(file));
    auto tmpl = ChatTemplate::Parse(
        *ReadFileToString(base + "/" + spec["template_file"].get<std::string>()));
    ASSERT_TRUE(tmpl.ok()) << file;
    RenderOptions opt;
    opt.clock = [] { return std::time_t(1768435200); };
    opt.clock_is_utc = true;
    for (const auto& c : spec["cases"]) {
      auto ctx = MakeChatContext(c["messages"], c["tools"], c["add_generation_prompt"].get<bool>(),
                                 spec["bos_token"].get<std::string>(),
                                 spec["eos_token"].get<std::string>(),
                                 c.contains("extra_kwargs") ? c["extra_kwargs"] : nullptr);
      auto plain = tmpl->Render(ctx, opt);
      auto tracked = tmpl->RenderTracked(ctx, {"/bos_token", "/eos_token"}, opt);
      ASSERT_EQ(plain.ok(), tracked.ok()) << file << " / " << c["name"];
      if (!plain.ok()) continue;
      ++rendered;
      EXPECT_EQ(*plain, tracked->text) << file << " / " << c["name"];
      size_t pos = 0;
      for (const auto& [b, e] : tracked->client_spans) {
        EXPECT_TRUE(pos <= b && b < e && e <= tracked->text.size()) << file;
        pos = e;
      }
      with_spans += !tracked->client_spans.empty();
    }
  }
  EXPECT_GT(rendered, 500);
  EXPECT_GT(with_spans, rendered / 2);
}

}  // namespace
}  // namespace tachyon::chat
