// Where the shared reference data lives, found at run time (no build path is compiled in):
// $TACHYON_TESTDATA when set; else the first shared/testdata folder beside the test
// executable's folder or one of its parents (a checkout's build/ sits in the checkout, with
// shared/ beside the checkout); else the same search from the working directory.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tachyon {

// The testdata folder, or "" when $TACHYON_TESTDATA names no folder or none is found.
std::string TestdataDir();

// SmolLM2-135M-Instruct (Q4_1 GGUF, a real chat model) when present: $TACHYON_SMOLLM2, else the
// model cache that scripts/setup.sh fills ($HOME/.cache/tachyon/models); "" when absent.
std::string SmolLm2Path();

// The files directly in `dir` whose names end in `suffix` (e.g. ".json"), as dir + "/" + name,
// sorted; empty when `dir` cannot be read.
std::vector<std::string> FilesWithSuffix(const std::string& dir, std::string_view suffix);

}  // namespace tachyon
