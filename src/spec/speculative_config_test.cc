#include "spec/speculative_config.h"

#include <gtest/gtest.h>

namespace tachyon::spec {
namespace {

TEST(SpeculativeConfigTest, ParsesVllmSpelling) {
  auto c = ParseSpeculativeConfig(
      R"({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2,
          "prompt_lookup_max": 4, "disable_by_batch_size": 6, "min_acceptance_rate": 0.4})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->method, SpecMethod::kNgram);
  EXPECT_EQ(c->num_speculative_tokens, 5);
  EXPECT_EQ(c->prompt_lookup_min, 2);
  EXPECT_EQ(c->prompt_lookup_max, 4);
  EXPECT_EQ(c->disable_by_batch_size, 6);
  EXPECT_DOUBLE_EQ(c->min_acceptance_rate, 0.4);
  EXPECT_TRUE(ValidateSpeculativeConfig(*c).ok());
}

TEST(SpeculativeConfigTest, OneLookupBoundSetsBoth) {
  auto c = ParseSpeculativeConfig(R"({"method":"ngram","num_speculative_tokens":3,
                                      "prompt_lookup_max":1})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->prompt_lookup_min, 1);
  EXPECT_EQ(c->prompt_lookup_max, 1);
  c = ParseSpeculativeConfig(R"({"method":"ngram","num_speculative_tokens":3,
                                 "prompt_lookup_min":7})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->prompt_lookup_min, 7);
  EXPECT_EQ(c->prompt_lookup_max, 7);
}

TEST(SpeculativeConfigTest, ErrorsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"[1]", "JSON object"},
      {"{", "not valid JSON"},
      {R"({"num_speculative_tokens": 3})", "\"method\""},
      {R"({"method": "eagle", "num_speculative_tokens": 3})", "\"method\""},
      {R"({"method": 3, "num_speculative_tokens": 3})", "\"method\""},
      {R"({"method": "ngram"})", "\"num_speculative_tokens\""},
      {R"({"method": "ngram", "num_speculative_tokens": 0})", "\"num_speculative_tokens\""},
      {R"({"method": "ngram", "num_speculative_tokens": 99})", "\"num_speculative_tokens\""},
      {R"({"method": "ngram", "num_speculative_tokens": "3"})", "\"num_speculative_tokens\""},
      {R"({"method": "ngram", "num_speculative_tokens": 2.5})", "\"num_speculative_tokens\""},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5,
           "prompt_lookup_max": 2})",
       "\"prompt_lookup_min\""},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 0})",
       "\"prompt_lookup_max\""},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "model": "x.gguf"})", "\"model\""},
      {R"({"method": "draft_model", "num_speculative_tokens": 3})", "\"model\""},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "min_acceptance_rate": 2})",
       "\"min_acceptance_rate\""},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "disable_by_batch_size": 0})",
       "\"disable_by_batch_size\""},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "speculative_model": "x"})",
       "\"speculative_model\": unknown field"},
  };
  for (const auto& [json, want] : cases) {
    auto c = ParseSpeculativeConfig(json);
    ASSERT_FALSE(c.ok()) << json;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << json;
    EXPECT_NE(c.status().message().find(want), std::string::npos)
        << json << " -> " << c.status().message();
  }
}

TEST(SpeculativeConfigTest, SuffixFieldsAsVllmSpellsThem) {
  auto c = ParseSpeculativeConfig(R"({"method": "suffix", "num_speculative_tokens": 8})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->method, SpecMethod::kSuffix);
  EXPECT_EQ(c->suffix.max_tree_depth, 24);  // vLLM's defaults
  EXPECT_EQ(c->suffix.max_cached_requests, 10000);
  EXPECT_DOUBLE_EQ(c->suffix.max_spec_factor, 1.0);
  EXPECT_DOUBLE_EQ(c->suffix.min_token_prob, 0.1);
  EXPECT_TRUE(ValidateSpeculativeConfig(*c).ok());
  c = ParseSpeculativeConfig(
      R"({"method": "suffix", "num_speculative_tokens": 8, "suffix_decoding_max_tree_depth": 32,
          "suffix_decoding_max_cached_requests": 0, "suffix_decoding_max_spec_factor": 2.5,
          "suffix_decoding_min_token_prob": 0})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->suffix.max_tree_depth, 32);
  EXPECT_EQ(c->suffix.max_cached_requests, 0);
  EXPECT_DOUBLE_EQ(c->suffix.max_spec_factor, 2.5);
  EXPECT_DOUBLE_EQ(c->suffix.min_token_prob, 0.0);
  EXPECT_TRUE(ValidateSpeculativeConfig(*c).ok());

  const std::pair<const char*, const char*> bad[] = {
      {R"({"method": "suffix", "num_speculative_tokens": 4, "suffix_decoding_max_tree_depth": 1})",
       "\"suffix_decoding_max_tree_depth\""},
      {R"({"method": "suffix", "num_speculative_tokens": 4,
           "suffix_decoding_max_cached_requests": -1})",
       "\"suffix_decoding_max_cached_requests\""},
      {R"({"method": "suffix", "num_speculative_tokens": 4, "suffix_decoding_max_spec_factor": 0})",
       "\"suffix_decoding_max_spec_factor\": must be a number in (0, 32]"},
      {R"({"method": "suffix", "num_speculative_tokens": 4,
           "suffix_decoding_min_token_prob": "high"})",
       "\"suffix_decoding_min_token_prob\""},
      {R"({"method": "ngram", "num_speculative_tokens": 4, "suffix_decoding_min_token_prob": 0.2})",
       "is only used by method suffix"},
  };
  for (const auto& [json, want] : bad) {
    auto r = ParseSpeculativeConfig(json);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << json << " -> " << r.status().message();
  }
}

TEST(SpeculativeConfigTest, DraftModelValidates) {
  auto c = ParseSpeculativeConfig(
      R"({"method": "draft_model", "num_speculative_tokens": 4, "model": "draft.gguf"})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->method, SpecMethod::kDraftModel);
  EXPECT_EQ(c->model, "draft.gguf");
  EXPECT_TRUE(ValidateSpeculativeConfig(*c).ok());
  SpeculativeConfig no_model = *c;
  no_model.model.clear();
  EXPECT_EQ(ValidateSpeculativeConfig(no_model).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateSpeculativeConfig(SpeculativeConfig{}).ok());  // off
  EXPECT_EQ(c->draft_p_min, kDefaultDraftPMin);
  EXPECT_EQ(c->draft_vocab_size, kDefaultDraftVocabSize);
}

TEST(SpeculativeConfigTest, DraftVocabSizeIsACountOfMethodDraftModel) {
  auto c = ParseSpeculativeConfig(
      R"({"method": "draft_model", "num_speculative_tokens": 8, "model": "d",
          "draft_vocab_size": 32768})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->draft_vocab_size, 32768);
  EXPECT_TRUE(ValidateSpeculativeConfig(*c).ok());
  for (const char* bad : {"-1", "0.5", "\"x\""}) {
    std::string text = R"({"method": "draft_model", "num_speculative_tokens": 8, "model": "d", )";
    text += R"("draft_vocab_size": )";
    text += bad;
    text += "}";
    auto b = ParseSpeculativeConfig(text);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("draft_vocab_size"), std::string::npos);
  }
  auto suffix = ParseSpeculativeConfig(
      R"({"method": "suffix", "num_speculative_tokens": 4, "draft_vocab_size": 100})");
  ASSERT_FALSE(suffix.ok());
  EXPECT_NE(suffix.status().message().find("only used by method draft_model"), std::string::npos);
}

TEST(SpeculativeConfigTest, DraftPMinIsAProbabilityOfMethodDraftModel) {
  auto c = ParseSpeculativeConfig(
      R"({"method": "draft_model", "num_speculative_tokens": 8, "model": "d", "draft_p_min": 0})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->draft_p_min, 0.0);
  for (const char* bad : {"1.5", "-0.1", "\"x\""}) {
    std::string text = R"({"method": "draft_model", "num_speculative_tokens": 8, "model": "d", )";
    text += R"("draft_p_min": )";
    text += bad;
    text += "}";
    auto b = ParseSpeculativeConfig(text);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("draft_p_min"), std::string::npos);
  }
  auto ngram = ParseSpeculativeConfig(
      R"({"method": "ngram", "num_speculative_tokens": 4, "draft_p_min": 0.5})");
  ASSERT_FALSE(ngram.ok());
  EXPECT_NE(ngram.status().message().find("only used by method draft_model"), std::string::npos);
}

}  // namespace
}  // namespace tachyon::spec
