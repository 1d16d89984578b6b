// Helpers shared by the speculative decoding tests (speculative_test.cc, draft_runner_test.cc):
// run a set of requests to completion and compare two runs choice by choice. For tests.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/detokenizer.h"
#include "engine/testing/test_harness.h"

namespace tachyon::engine::testing {

// Per request (in the order given), its choices by index.
using Outputs = std::vector<std::map<int, Completion>>;

// Adds reqs[i] as request first_id + i, runs `h` to completion and returns the outputs;
// expects every request accepted and no KV block left in use afterwards, in the target's
// cache and (when a draft model speculates) in the draft model's.
Outputs RunAll(Harness* h, const std::vector<EngineRequest>& reqs, size_t first_id = 0);

// Expects `b` to hold what `a` holds: for every choice of `a`, the same tokens, text, finish
// reason and logprobs (token, logprob, top alternatives). REQUIRES: b has a's choices.
void ExpectSame(const Outputs& a, const Outputs& b);

// n greedy requests of max_tokens each, request i on MakePrompt(min_len + (5 i) % 23, i).
std::vector<EngineRequest> MixedGreedy(int n, int max_tokens, int min_len = 3);

// Token i detokenizes to the letter 'a' + i % 26 (so outputs have text stop strings can match).
std::shared_ptr<FakeDetokenizer> LetterDetokenizer(int n_vocab);

// Given `text`, the 20-token greedy text of MakePrompt(9, 1): requests on that prompt that stop
// on the 2 characters at offsets 2, 5, 9 and 13 of it (max_tokens 20), then requests with
// max_tokens 1, 2, 3, 6, 7.
std::vector<EngineRequest> StopAndLengthRequests(const std::string& text);

}  // namespace tachyon::engine::testing
