// `tachyon quantize` round trips (GGUF written by tachyon, read by tachyon), quantization
// quality (perplexity and KL divergence of Q8_0 against F16 on stories260K), quantize-on-load
// through the CLI, and `tachyon pull` argument errors. The Hub itself is tested against a mock
// server in tests/python/test_pull.py.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "cli_test_util.h"
#include "util/testing/testdata.h"

namespace tachyon::hub_cli_test {
namespace {

namespace fs = std::filesystem;

using Output = cli_test_util::CommandResult;
using cli_test_util::Slurp;

class HubCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tachyon_hub_cli_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    const std::string td = TestdataDir();
    if (!td.empty() && fs::exists(td + "/stories260K/stories260K.gguf")) {
      stories_ = td + "/stories260K/stories260K.gguf";
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Runs the tachyon binary with `args` (already shell-quoted), with the Hub unreachable.
  Output Tachyon(const std::string& args) const {
    return cli_test_util::RunTachyon(args, Path("cmd"),
                                     "HF_HUB_OFFLINE=1 HF_HUB_CACHE=" + Path("cache"));
  }

  std::string WriteStory() const {
    const std::string path = Path("story.txt");
    std::ofstream(path) << kStory;
    return path;
  }

  static double Field(const std::string& text, const std::string& label) {
    std::smatch m;
    const std::regex re(label + R"(\s*([0-9.eE+-]+))");
    if (!std::regex_search(text, m, re)) {
      ADD_FAILURE() << "no '" << label << "' in:\n" << text;
      return NAN;
    }
    return std::stod(m[1].str());
  }

  static constexpr const char* kStory =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her friends. One day, she saw a big red ball under a tree. She ran to the ball "
      "and picked it up. It was soft and round.\n"
      "Lily wanted to share the ball with her friend Tom. Tom was sad because he lost his toy "
      "car. Lily said, \"Tom, do you want to play with my ball?\" Tom smiled and said, \"Yes, "
      "thank you, Lily!\" They threw the ball to each other and laughed. The sun was warm and "
      "the birds sang in the trees.\n"
      "After a while, Lily's mom called her. \"Lily, it is time to go home and eat dinner.\" "
      "Lily said goodbye to Tom and gave him a big hug. Tom was happy again. He said, \"Thank "
      "you for sharing, Lily. You are a good friend.\"\n"
      "The next day, Lily and Tom went to the park again. They found a little dog. The dog was "
      "hungry and cold. Lily gave the dog some bread and Tom gave him a blanket. The dog wagged "
      "his tail and licked their hands. They named the dog Max. Max became their best friend, "
      "and they played together every day.\n"
      "One morning, Ben the bunny hopped into the garden. He was looking for a carrot. He saw "
      "a big orange carrot in the ground. He pulled and pulled, but the carrot did not move. "
      "Ben asked his friend the bird to help. The bird pulled too, and the carrot came out. "
      "Ben and the bird shared the carrot and were very happy.\n"
      "Once there was a boy named Sam who liked to build things. He built a tall tower with his "
      "blocks. His little sister wanted to help, but she was too small. Sam showed her how to "
      "put one block on top of another. Together they built the biggest tower in the house. "
      "Mom saw the tower and clapped her hands. \"What a great job!\" she said.\n";

  fs::path dir_;
  std::string stories_;
};

#define REQUIRE_STORIES() \
  if (stories_.empty()) GTEST_SKIP() << "testdata not found (TACHYON_TESTDATA)"

TEST_F(HubCliTest, QuantizeRoundTripAndQ8PerplexityWithinOnePercentOfF16) {
  REQUIRE_STORIES();
  const std::string story = WriteStory();
  for (const char* type : {"F16", "Q8_0"}) {
    Output q = Tachyon("quantize " + stories_ + " " + Path(type) + ".gguf --type " + type);
    ASSERT_EQ(q.exit_code, 0) << q.err;
    EXPECT_NE(q.out.find(type), std::string::npos) << q.out;
  }
  // The files tachyon wrote are read back by tachyon.
  Output info = Tachyon("inspect " + Path("Q8_0.gguf") + " --json");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("Q8_0"), std::string::npos);
  Output f16 = Tachyon("perplexity -m " + Path("F16.gguf") + " -f " + story + " --ctx 128");
  ASSERT_EQ(f16.exit_code, 0) << f16.err;
  Output q8 = Tachyon("perplexity -m " + Path("Q8_0.gguf") + " -f " + story + " --ctx 128");
  ASSERT_EQ(q8.exit_code, 0) << q8.err;
  const double p16 = Field(f16.out, "perplexity:"), p8 = Field(q8.out, "perplexity:");
  EXPECT_GT(p16, 1.0);
  EXPECT_LT(p16, 100.0);  // a trained model on its kind of text
  EXPECT_LT(std::fabs(p8 / p16 - 1.0), 0.01) << "F16 " << p16 << ", Q8_0 " << p8;
  EXPECT_NE(f16.out.find("chunks of 128"), std::string::npos) << f16.out;
}

TEST_F(HubCliTest, KlDivergence) {
  REQUIRE_STORIES();
  const std::string story = WriteStory();
  ASSERT_EQ(Tachyon("quantize " + stories_ + " " + Path("f16.gguf") + " --type F16").exit_code, 0);
  ASSERT_EQ(Tachyon("quantize " + stories_ + " " + Path("q4.gguf") + " --type Q4_0").exit_code, 0);
  const std::string base = Path("base.kld");
  Output b = Tachyon("perplexity -m " + Path("f16.gguf") + " -f " + story +
                     " --ctx 128 --kl-divergence-base " + base);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const double ppl = Field(b.out, "perplexity:");

  // The base model against itself: no divergence, full agreement, the same perplexity.
  Output self = Tachyon("perplexity -m " + Path("f16.gguf") + " --kl-divergence-base " + base +
                        " --kl-divergence");
  ASSERT_EQ(self.exit_code, 0) << self.err;
  EXPECT_LT(Field(self.out, "mean KL divergence:"), 1e-9);
  EXPECT_DOUBLE_EQ(Field(self.out, "top-1 agreement:"), 100.0);
  EXPECT_NEAR(Field(self.out, R"(perplexity \(base\):)"), ppl, 1e-3);
  EXPECT_NEAR(Field(self.out, R"(perplexity \(model\):)"), ppl, 1e-3);

  // Q4_0 diverges more than Q8_0 (quantized on load here), and both stay close.
  Output q8 = Tachyon("perplexity -m " + stories_ + " --quantize q8_0 --kl-divergence-base " +
                      base + " --kl-divergence");
  ASSERT_EQ(q8.exit_code, 0) << q8.err;
  Output q4 = Tachyon("perplexity -m " + Path("q4.gguf") + " --kl-divergence-base " + base +
                      " --kl-divergence");
  ASSERT_EQ(q4.exit_code, 0) << q4.err;
  const double kl8 = Field(q8.out, "mean KL divergence:"),
               kl4 = Field(q4.out, "mean KL divergence:");
  EXPECT_GT(kl8, 0.0);
  EXPECT_LT(kl8, kl4);
  EXPECT_LT(kl4, 0.5);
  EXPECT_GT(Field(q8.out, "top-1 agreement:"), 90.0);
  EXPECT_NEAR(Field(q8.out, R"(perplexity \(base\):)"), ppl, 1e-3);

  // Bad base files.
  std::ofstream(Path("junk.kld")) << "not a base file";
  Output junk = Tachyon("perplexity -m " + Path("f16.gguf") + " --kl-divergence-base " +
                        Path("junk.kld") + " --kl-divergence");
  EXPECT_NE(junk.exit_code, 0);
  EXPECT_NE(junk.err.find("not a KL-divergence base file"), std::string::npos) << junk.err;
  const std::string all = Slurp(base);
  std::ofstream(Path("cut.kld"), std::ios::binary) << all.substr(0, all.size() - 100);
  Output cut = Tachyon("perplexity -m " + Path("f16.gguf") + " --kl-divergence-base " +
                       Path("cut.kld") + " --kl-divergence");
  EXPECT_NE(cut.exit_code, 0);
  EXPECT_NE(cut.err.find("truncated"), std::string::npos) << cut.err;
  Output none = Tachyon("perplexity -m " + Path("f16.gguf") + " --kl-divergence");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("--kl-divergence-base"), std::string::npos) << none.err;
}

TEST_F(HubCliTest, QuantizeOnLoadEqualsQuantizedFile) {
  REQUIRE_STORIES();
  ASSERT_EQ(Tachyon("quantize " + stories_ + " " + Path("q8.gguf") + " --type Q8_0").exit_code, 0);
  const std::string ids = "1,403,407,261,378,432,383,12,99,7";
  Output a = Tachyon("logits -m " + stories_ + " --quantize q8_0 --ids " + ids + " --out " +
                     Path("a.f32"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  Output b = Tachyon("logits -m " + Path("q8.gguf") + " --ids " + ids + " --out " + Path("b.f32"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::string la = Slurp(Path("a.f32")), lb = Slurp(Path("b.f32"));
  EXPECT_EQ(la.size(), 10u * 512 * 4);
  EXPECT_TRUE(la == lb);
  Output bad = Tachyon("logits -m " + stories_ + " --quantize q2_xs --ids 1 --out " + Path("c"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("q8_0, q4_0, q4_k"), std::string::npos) << bad.err;
}

TEST_F(HubCliTest, ModelNamesAndPullErrors) {
  // A missing local file says how to name a model.
  Output missing = Tachyon("logits -m " + Path("missing.gguf") + " --ids 1 --out " + Path("x"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("no such file"), std::string::npos) << missing.err;
  // Offline and not cached: says how to pass a local path.
  Output offline = Tachyon("pull org/not-cached");
  EXPECT_NE(offline.exit_code, 0);
  EXPECT_NE(offline.err.find("local path"), std::string::npos) << offline.err;
  Output local = Tachyon("pull ./some/folder");
  EXPECT_NE(local.exit_code, 0);
  EXPECT_NE(local.err.find("not a Hub repository"), std::string::npos) << local.err;
  Output bad = Tachyon("pull hf://only-one-part");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("hf://ORG/NAME"), std::string::npos) << bad.err;
  EXPECT_EQ(Tachyon("pull --help").exit_code, 0);
}

}  // namespace
}  // namespace tachyon::hub_cli_test
