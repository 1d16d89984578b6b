// Renders every case of ../shared/testdata/chat-templates/cases/*.json with its template and
// compares with transformers' output byte for byte (or expects the recorded failure).

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

std::time_t ParseFixedTime(const std::string& iso) {
  std::tm tm{};
  if (!strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return 0;
  return timegm(&tm);
}

TEST(ChatTemplateCases, AllCasesMatchTransformers) {
  std::string root = TestdataDir();
  if (root.empty()) GTEST_SKIP() << "testdata not found (../shared/testdata); skipping";
  std::string base = root + "/chat-templates";
  std::vector<std::string> files = FilesWithSuffix(base + "/cases", ".json");
  if (files.empty()) GTEST_SKIP() << "no chat-template cases in " << base;
  int total = 0, passed = 0;
  for (const std::string& file : files) {
    auto text = ReadFileToString(file);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    auto spec = nlohmann::ordered_json::parse(*text);
    auto src = ReadFileToString(base + "/" + spec["template_file"].get<std::string>());
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    auto tmpl = ChatTemplate::Parse(*src);
    RenderOptions opt;
    std::time_t fixed = ParseFixedTime(spec.value("strftime_now_fixed", ""));
    opt.clock = [fixed] { return fixed; };
    opt.clock_is_utc = true;
    for (const auto& c : spec["cases"]) {
      ++total;
      std::string label = file.substr(file.rfind('/') + 1) + " / " + c["name"].get<std::string>();
      if (!tmpl.ok()) {
        ADD_FAILURE() << label << ": parse failed: " << tmpl.status().ToString();
        continue;
      }
      auto ctx = MakeChatContext(c["messages"], c["tools"], c["add_generation_prompt"].get<bool>(),
                                 spec["bos_token"].get<std::string>(),
                                 spec["eos_token"].get<std::string>(),
                                 c.contains("extra_kwargs") ? c["extra_kwargs"] : nullptr);
      auto out = tmpl->Render(ctx, opt);
      if (c.contains("expected_error")) {
        if (out.ok()) {
          ADD_FAILURE() << label << ": expected error '" << c["expected_error"].get<std::string>()
                        << "' but rendered:\n"
                        << *out;
          continue;
        }
        if (c.value("error_raised_by_template", false) &&
            out.status().message() != c["expected_error"].get<std::string>()) {
          ADD_FAILURE() << label << ": message '" << out.status().message() << "' != '"
                        << c["expected_error"].get<std::string>() << "'";
          continue;
        }
        ++passed;
        continue;
      }
      if (!out.ok()) {
        ADD_FAILURE() << label << ": render failed: " << out.status().ToString();
        continue;
      }
      std::string expected = c["expected"].get<std::string>();
      if (*out != expected) {
        size_t k = 0;
        while (k < out->size() && k < expected.size() && (*out)[k] == expected[k]) ++k;
        size_t from = k > 80 ? k - 80 : 0;
        ADD_FAILURE() << label << ": mismatch at byte " << k
                      << "\n got: " << nlohmann::json(out->substr(from, 200)).dump()
                      << "\nwant: " << nlohmann::json(expected.substr(from, 200)).dump();
        continue;
      }
      ++passed;
    }
  }
  std::printf("chat template cases: %d / %d passed\n", passed, total);
  EXPECT_EQ(passed, total);
}

}  // namespace
}  // namespace tachyon::chat
