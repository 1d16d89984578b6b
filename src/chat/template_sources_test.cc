#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "gguf/gguf.h"

namespace tachyon::chat {
namespace {

std::string TempPath(const std::string& name) {
  return "/tmp/tachyon_chat_" + std::to_string(getpid()) + "_" + name;
}

TEST(TemplateSources, TokenizerConfigStringAndList) {
  auto s = ChatTemplateFromTokenizerConfigText(R"({"chat_template": "T"})", "", "cfg");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, "T");
  const char* list = R"({"chat_template": [{"name": "default", "template": "D"},
                                           {"name": "tool_use", "template": "U"}]})";
  EXPECT_EQ(*ChatTemplateFromTokenizerConfigText(list, "", "cfg"), "D");
  EXPECT_EQ(*ChatTemplateFromTokenizerConfigText(list, "tool_use", "cfg"), "U");
  auto missing = ChatTemplateFromTokenizerConfigText(list, "rag", "cfg");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(ChatTemplateFromTokenizerConfigText("{", "", "cfg").ok());
  EXPECT_FALSE(ChatTemplateFromTokenizerConfigText("{}", "", "cfg").ok());
  EXPECT_FALSE(ChatTemplateFromTokenizerConfigText(R"({"chat_template": 3})", "", "cfg").ok());
  // A non-string name is no name (it used to throw from nlohmann's value()).
  const char* odd = R"({"chat_template": [{"name": 7, "template": "N"},
                                          {"name": "default", "template": "D"}]})";
  EXPECT_EQ(*ChatTemplateFromTokenizerConfigText(odd, "", "cfg"), "D");
  EXPECT_EQ(ChatTemplateFromTokenizerConfigText(odd, "7", "cfg").status().code(),
            StatusCode::kNotFound);
}

TEST(TemplateSources, LoadFromTokenizerConfigFile) {
  std::string path = TempPath("tokenizer_config.json");
  {
    std::ofstream f(path);
    f << R"({"chat_template": "{{ bos_token }}hi", "bos_token": {"content": "<s>"},
             "eos_token": "</s>"})";
  }
  auto m = LoadChatTemplate(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->source, "{{ bos_token }}hi");
  EXPECT_EQ(m->bos_token, "<s>");
  EXPECT_EQ(m->eos_token, "</s>");
  std::remove(path.c_str());
  EXPECT_FALSE(LoadChatTemplate(path).ok());
}

TEST(TemplateSources, Gguf) {
  gguf::GgufWriter w;
  w.Set("tokenizer.chat_template", gguf::Value::String("main"));
  w.Set("tokenizer.chat_template.tool_use", gguf::Value::String("tools"));
  w.Set("tokenizer.ggml.tokens", gguf::Value::StringArray({"<unk>", "<s>", "</s>"}));
  w.Set("tokenizer.ggml.bos_token_id", gguf::Value::Uint32(1));
  w.Set("tokenizer.ggml.eos_token_id", gguf::Value::Uint32(2));
  std::string path = TempPath("model.gguf");
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(*ChatTemplateFromGguf(*file), "main");
  EXPECT_EQ(*ChatTemplateFromGguf(*file, "tool_use"), "tools");
  EXPECT_EQ(ChatTemplateFromGguf(*file, "rag").status().code(), StatusCode::kNotFound);
  auto m = LoadChatTemplate(path, "tool_use");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->source, "tools");
  EXPECT_EQ(m->bos_token, "<s>");
  EXPECT_EQ(m->eos_token, "</s>");
  std::remove(path.c_str());
}

TEST(TemplateSources, ParsedTemplateIsSharedAndThreadSafe) {
  auto t = ChatTemplate::Parse("{% for m in messages %}{{ m.content }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  ChatTemplate copy = *t;
  auto ctx = MakeChatContext(nlohmann::ordered_json::parse(R"([{"role":"user","content":"a"}])"),
                             nullptr, true, "", "");
  EXPECT_EQ(ctx["documents"], nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 50; ++k) ok += copy.Render(ctx).value() == "a";
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 200);
}

}  // namespace
}  // namespace tachyon::chat
