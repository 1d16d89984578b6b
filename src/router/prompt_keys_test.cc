#include "router/prompt_keys.h"

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "router/replica_picker.h"
#include "util/testing/testdata.h"

namespace tachyon::router {
namespace {

class PromptKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = TestdataDir();
    model_ = dir + "/stories260K/stories260K.gguf";
    if (dir.empty() || !std::ifstream(model_)) GTEST_SKIP() << "stories260K.gguf not found";
    template_ = ::testing::TempDir() + "/prompt_keys_template.jinja";
    std::ofstream(template_) << "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: "
                                "{{ m['content'] }}\n{% endfor %}assistant:";
  }
  std::string model_;
  std::string template_;
};

TEST_F(PromptKeysTest, CompletionPromptsAreHashedAsTheEngineHashesThem) {
  auto keys = PromptKeys::Load(model_, "", 16);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  const std::string text(200, 'a');
  auto blocks = (*keys)->ForCompletion({{"prompt", text}});
  ASSERT_TRUE(blocks.has_value());
  const std::vector<int32_t> ids = (*keys)->tokenizer().Encode(text, true, true);
  std::vector<kv::BlockHash> want;
  kv::ExtendBlockHashes(ids, 16, kv::RootHash(""), ids.size(), &want);
  EXPECT_EQ(blocks->prompt_tokens, static_cast<int>(ids.size()));
  EXPECT_EQ(blocks->hashes, want);
  EXPECT_EQ(blocks->hashes.size(), ids.size() / 16);

  // Token-id prompts are used as given; a cache salt is another namespace.
  std::vector<int32_t> given(40, 7);
  auto by_ids = (*keys)->ForCompletion({{"prompt", given}, {"cache_salt", "t1"}});
  ASSERT_TRUE(by_ids.has_value());
  std::vector<kv::BlockHash> salted;
  kv::ExtendBlockHashes(given, 16, kv::RootHash("t1"), given.size(), &salted);
  EXPECT_EQ(by_ids->hashes, salted);

  // The key names the prompt: its last block's when it has blocks; else its tokens, in the
  // salt's namespace.
  EXPECT_EQ(blocks->key, BlockKey(blocks->hashes.back()));
  auto short_a = (*keys)->ForCompletion({{"prompt", std::vector<int32_t>{5, 6, 7}}});
  auto short_a2 = (*keys)->ForCompletion({{"prompt", std::vector<int32_t>{5, 6, 7}}});
  auto short_b = (*keys)->ForCompletion({{"prompt", std::vector<int32_t>{5, 6, 8}}});
  auto short_salted =
      (*keys)->ForCompletion({{"prompt", std::vector<int32_t>{5, 6, 7}}, {"cache_salt", "t1"}});
  ASSERT_TRUE(short_a && short_a2 && short_b && short_salted);
  EXPECT_TRUE(short_a->hashes.empty());
  ASSERT_TRUE(short_a->key.has_value());
  EXPECT_EQ(short_a->key, short_a2->key);
  EXPECT_NE(short_a->key, short_b->key);
  EXPECT_NE(short_a->key, short_salted->key);

  // Not a valid request: no keys (the replica answers the error).
  EXPECT_FALSE((*keys)->ForCompletion({{"prompt", 5}}).has_value());
  // stories260K has no chat template of its own.
  EXPECT_FALSE((*keys)->ForChat({{"messages", {{{"role", "user"}, {"content", "hi"}}}}}));
}

TEST_F(PromptKeysTest, ChatPromptsUseTheTemplate) {
  auto keys = PromptKeys::Load(model_, template_, 16);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  const std::string content(120, 'b');
  nlohmann::ordered_json body = {{"messages", {{{"role", "user"}, {"content", content}}}}};
  auto blocks = (*keys)->ForChat(body);
  ASSERT_TRUE(blocks.has_value());
  const std::string rendered =
      (*keys)->tokenizer().bos_text() + "user: " + content + "\nassistant:";
  const std::vector<int32_t> ids = (*keys)->tokenizer().Encode(rendered, false, true);
  EXPECT_EQ(blocks->prompt_tokens, static_cast<int>(ids.size()));
  std::vector<kv::BlockHash> want;
  kv::ExtendBlockHashes(ids, 16, kv::RootHash(""), ids.size(), &want);
  EXPECT_EQ(blocks->hashes, want);
  EXPECT_FALSE((*keys)->ForChat({{"messages", "nope"}}).has_value());
}

TEST(PromptKeys, LoadErrorsNameTheFile) {
  auto keys = PromptKeys::Load("/nonexistent/model.gguf", "", 16);
  ASSERT_FALSE(keys.ok());
  EXPECT_NE(keys.status().ToString().find("/nonexistent/model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace tachyon::router
