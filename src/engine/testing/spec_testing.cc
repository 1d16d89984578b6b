#include "engine/testing/spec_testing.h"

#include <gtest/gtest.h>

#include "engine/speculative_step.h"

namespace tachyon::engine::testing {

Outputs RunAll(Harness* h, const std::vector<EngineRequest>& reqs, size_t first_id) {
  for (size_t i = 0; i < reqs.size(); ++i) {
    Status s = h->Add(first_id + i, reqs[i]);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  h->RunToCompletion();
  Outputs out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    for (int c = 0; c < reqs[i].params.n; ++c) out[i][c] = h->result(first_id + i, c);
  }
  EXPECT_EQ(h->engine().Metrics().kv.used_blocks, 0);
  if (const Speculator* s = h->engine().speculator(); s && s->draft_model()) {
    EXPECT_EQ(s->draft_model()->kv().Stats().used_blocks, 0) << "draft blocks leaked";
  }
  return out;
}

void ExpectSame(const Outputs& a, const Outputs& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    for (const auto& [c, want] : a[i]) {
      const Completion& got = b[i].at(c);
      EXPECT_EQ(got.tokens, want.tokens) << "request " << i << " choice " << c;
      EXPECT_EQ(got.text, want.text) << "request " << i << " choice " << c;
      EXPECT_EQ(got.finish, want.finish) << "request " << i << " choice " << c;
      ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
      for (size_t j = 0; j < want.logprobs.size(); ++j) {
        EXPECT_EQ(got.logprobs[j].token, want.logprobs[j].token);
        EXPECT_EQ(got.logprobs[j].logprob, want.logprobs[j].logprob);
        EXPECT_EQ(got.logprobs[j].top, want.logprobs[j].top);
      }
    }
  }
}

std::vector<EngineRequest> MixedGreedy(int n, int max_tokens, int min_len) {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < n; ++i) {
    reqs.push_back(Greedy(MakePrompt(min_len + (i * 5) % 23, i), max_tokens));
  }
  return reqs;
}

std::shared_ptr<FakeDetokenizer> LetterDetokenizer(int n_vocab) {
  std::vector<std::string> pieces;
  for (int i = 0; i < n_vocab; ++i)
    pieces.push_back(std::string(1, static_cast<char>('a' + i % 26)));
  return std::make_shared<FakeDetokenizer>(std::move(pieces));
}

std::vector<EngineRequest> StopAndLengthRequests(const std::string& text) {
  std::vector<EngineRequest> reqs;
  for (int at : {2, 5, 9, 13}) {
    EngineRequest r = Greedy(MakePrompt(9, 1), 20);
    r.params.stop = {text.substr(at, 2)};
    reqs.push_back(r);
  }
  for (int max : {1, 2, 3, 6, 7}) reqs.push_back(Greedy(MakePrompt(9, 1), max));
  return reqs;
}

}  // namespace tachyon::engine::testing
