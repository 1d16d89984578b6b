#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "hub/cache.h"
#include "hub/model_spec.h"
#include "hub/pull.h"
#include "hub/resolve.h"
#include "hub/sha256.h"

namespace tachyon::hub {
namespace {

namespace fs = std::filesystem;

std::string Sha(std::string_view s) {
  Sha256 h;
  h.Update(s);
  return h.HexDigest();
}

// FIPS 180-4 / NIST example vectors.
TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                "klmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  Sha256 h;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) h.Update(chunk);
  EXPECT_EQ(h.HexDigest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, SplitUpdatesEqualOneUpdate) {
  std::string data;
  for (int i = 0; i < 300; ++i) data += static_cast<char>(i * 7 + 3);
  const std::string whole = Sha(data);
  for (size_t cut : {1, 55, 56, 63, 64, 65, 128, 299}) {
    Sha256 h;
    h.Update(data.substr(0, cut));
    h.Update(data.substr(cut));
    EXPECT_EQ(h.HexDigest(), whole) << cut;
  }
}

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "hub-test-XXXXXX").string();
    path_ = mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(Sha256Test, File) {
  TempDir dir;
  WriteFile(dir.path() + "/f", "abc");
  EXPECT_EQ(*Sha256File(dir.path() + "/f"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_FALSE(Sha256File(dir.path() + "/missing").ok());
}

TEST(ModelSpecTest, HubForms) {
  auto s = ParseModelSpec("Qwen/Qwen2.5-0.5B-Instruct");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->is_hub());
  EXPECT_EQ(s->repo, "Qwen/Qwen2.5-0.5B-Instruct");
  EXPECT_EQ(s->revision, "main");
  EXPECT_EQ(s->file, "");

  s = ParseModelSpec("TheBloke/X-GGUF:x.Q4_0.gguf");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->is_hub());
  EXPECT_EQ(s->repo, "TheBloke/X-GGUF");
  EXPECT_EQ(s->file, "x.Q4_0.gguf");
  EXPECT_EQ(s->ToString(), "TheBloke/X-GGUF:x.Q4_0.gguf");

  s = ParseModelSpec("hf://org/name/sub/dir/model.gguf");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->repo, "org/name");
  EXPECT_EQ(s->file, "sub/dir/model.gguf");

  s = ParseModelSpec("hf://org/name@v1.0");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->repo, "org/name");
  EXPECT_EQ(s->revision, "v1.0");
  EXPECT_EQ(s->ToString(), "org/name@v1.0");

  s = ParseModelSpec("org/name@abc:f.gguf");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->revision, "abc");
  EXPECT_EQ(s->file, "f.gguf");
}

TEST(ModelSpecTest, LocalForms) {
  for (const char* p : {"model.gguf", "org/model.gguf", "./org/name", "/abs/path", "~/x",
                        "some/dir/", "plain", "a/b/c"}) {
    auto s = ParseModelSpec(p);
    ASSERT_TRUE(s.ok()) << p;
    EXPECT_FALSE(s->is_hub()) << p;
    EXPECT_EQ(s->path, p);
  }
  // An existing folder wins over the repo reading.
  TempDir dir;
  fs::create_directories(dir.path() + "/org/name");
  const fs::path old = fs::current_path();
  fs::current_path(dir.path());
  auto s = ParseModelSpec("org/name");
  fs::current_path(old);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->is_hub());
}

TEST(ModelSpecTest, Errors) {
  EXPECT_FALSE(ParseModelSpec("").ok());
  EXPECT_FALSE(ParseModelSpec("hf://").ok());
  EXPECT_FALSE(ParseModelSpec("hf://justone").ok());
  EXPECT_FALSE(ParseModelSpec("hf://a/b/../../etc/passwd").ok());
  EXPECT_FALSE(ParseModelSpec("org/name:").ok());
  EXPECT_FALSE(ParseModelSpec("org/name:../x").ok());
  EXPECT_FALSE(IsValidRepoId("a--b/c"));
  EXPECT_FALSE(IsValidRepoId("-a/b"));
  EXPECT_FALSE(IsValidRepoId("a/b/c"));
  EXPECT_TRUE(IsValidRepoId("meta-llama/Llama-3.2-1B"));
}

TEST(CacheTest, LayoutAndRefs) {
  TempDir dir;
  RepoCache cache(dir.path(), "Org/Name");
  EXPECT_EQ(cache.dir(), dir.path() + "/models--Org--Name");
  EXPECT_EQ(cache.BlobPath("abc"), dir.path() + "/models--Org--Name/blobs/abc");
  EXPECT_EQ(cache.LockPath("abc"), dir.path() + "/.locks/models--Org--Name/abc.lock");
  const std::string commit(40, 'a');
  EXPECT_FALSE(cache.ReadRef("main").has_value());
  ASSERT_TRUE(cache.WriteRef("main", commit).ok());
  EXPECT_EQ(cache.ReadRef("main"), commit);
  EXPECT_EQ(cache.ReadRef(std::string(40, 'b')), std::string(40, 'b'));  // a commit is itself

  WriteFile(cache.BlobPath("etag1"), "hello");
  ASSERT_TRUE(cache.Link(commit, "sub/f.txt", "etag1").ok());
  EXPECT_TRUE(cache.Has(commit, "sub/f.txt"));
  EXPECT_FALSE(cache.Has(commit, "other"));
  EXPECT_TRUE(fs::is_symlink(cache.SnapshotPath(commit, "sub/f.txt")));
  EXPECT_EQ(fs::read_symlink(cache.SnapshotPath(commit, "sub/f.txt")).string(),
            "../../../blobs/etag1");
  EXPECT_EQ(cache.ListSnapshot(commit), std::vector<std::string>{"sub/f.txt"});
}

TEST(CacheTest, EnvironmentAndEtags) {
  setenv("HF_HUB_CACHE", "/x/hub", 1);
  EXPECT_EQ(DefaultCacheDir(), "/x/hub");
  unsetenv("HF_HUB_CACHE");
  setenv("HF_HOME", "/y", 1);
  EXPECT_EQ(DefaultCacheDir(), "/y/hub");
  unsetenv("HF_HOME");
  EXPECT_EQ(EtagToBlobName("\"abc123\""), "abc123");
  EXPECT_EQ(EtagToBlobName("W/\"abc-1\""), "abc-1");
  EXPECT_EQ(EtagToBlobName("\"../../x\""), "");
  EXPECT_TRUE(IsCommitHash(std::string(40, 'f')));
  EXPECT_FALSE(IsCommitHash(std::string(40, 'F')));
  EXPECT_FALSE(IsCommitHash("main"));
}

TEST(PullTest, FileChoice) {
  EXPECT_EQ(PickDefaultGguf({"README.md", "m.Q8_0.gguf", "m.Q4_K_M.gguf", "m.Q4_0.gguf"}),
            "m.Q4_K_M.gguf");
  EXPECT_EQ(PickDefaultGguf({"m.Q8_0.gguf", "m.q4_0.gguf"}), "m.q4_0.gguf");
  EXPECT_EQ(PickDefaultGguf({"b.F16.gguf", "a.Q5_K_S.gguf"}), "a.Q5_K_S.gguf");
  EXPECT_EQ(PickDefaultGguf({"mmproj-Q4_K_M.gguf", "m-Q4_K_M-00001-of-00002.gguf", "m.F16.gguf"}),
            "m.F16.gguf");
  EXPECT_EQ(PickDefaultGguf({"README.md"}), "");

  const std::vector<std::string> files = {"README.md",
                                          ".gitattributes",
                                          "config.json",
                                          "generation_config.json",
                                          "model-00001-of-00002.safetensors",
                                          "model-00002-of-00002.safetensors",
                                          "model.safetensors.index.json",
                                          "tokenizer.json",
                                          "tokenizer_config.json",
                                          "original/consolidated.00.pth",
                                          "merges.txt"};
  EXPECT_EQ(SelectHfFolderFiles(files),
            (std::vector<std::string>{
                "config.json", "generation_config.json", "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors", "model.safetensors.index.json",
                "tokenizer.json", "tokenizer_config.json"}));
  EXPECT_TRUE(SelectHfFolderFiles({"config.json", "pytorch_model.bin"}).empty());
}

TEST(ResolveTest, GenerationConfig) {
  TempDir dir;
  const std::string path = dir.path() + "/generation_config.json";
  EXPECT_TRUE(ReadGenerationConfig(path)->eos_token_ids.empty());  // missing: empty
  WriteFile(path, R"({"eos_token_id": [151645, 151643], "temperature": 0.7, "top_k": 20,
                      "top_p": 0.8, "do_sample": true, "repetition_penalty": 1.05})");
  auto g = ReadGenerationConfig(path);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_FLOAT_EQ(*g->temperature, 0.7f);
  EXPECT_EQ(*g->top_k, 20);
  EXPECT_TRUE(*g->do_sample);
  EXPECT_FALSE(g->min_p.has_value());
  WriteFile(path, R"({"eos_token_id": 2})");
  EXPECT_EQ(ReadGenerationConfig(path)->eos_token_ids, std::vector<int32_t>{2});
  WriteFile(path, R"({"eos_token_id": "x"})");
  EXPECT_FALSE(ReadGenerationConfig(path).ok());
  WriteFile(path, R"({"top_k": 1.5})");
  EXPECT_FALSE(ReadGenerationConfig(path).ok());
  WriteFile(path, "{nope");
  EXPECT_FALSE(ReadGenerationConfig(path).ok());
}

TEST(ResolveTest, LocalPaths) {
  TempDir dir;
  WriteFile(dir.path() + "/m.gguf", "GGUF");
  auto r = ResolveModel(dir.path() + "/m.gguf");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->is_hf_folder);
  EXPECT_EQ(r->name, "m");
  EXPECT_EQ(r->tokenizer_path, dir.path() + "/m.gguf");

  WriteFile(dir.path() + "/folder/config.json", "{}");
  WriteFile(dir.path() + "/folder/generation_config.json", R"({"eos_token_id": 7})");
  r = ResolveModel(dir.path() + "/folder");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->is_hf_folder);
  EXPECT_EQ(r->name, "folder");
  EXPECT_EQ(r->generation.eos_token_ids, std::vector<int32_t>{7});

  r = ResolveModel(dir.path() + "/missing.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  fs::create_directories(dir.path() + "/empty");
  EXPECT_FALSE(ResolveModel(dir.path() + "/empty").ok());
}

TEST(ResolveTest, OfflineHubNameUsesCacheOrSaysHowToPassAPath) {
  TempDir dir;
  ResolveOptions o;
  o.hub.cache_dir = dir.path();
  o.hub.offline = true;
  o.hub.progress = false;
  auto r = ResolveModel("org/model", o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("local path"), std::string::npos) << r.status().message();

  // A cached GGUF repo resolves with no network.
  RepoCache cache(dir.path(), "org/model");
  const std::string commit(40, 'c');
  WriteFile(cache.BlobPath("e1"), "GGUF");
  ASSERT_TRUE(cache.Link(commit, "m.Q4_0.gguf", "e1").ok());
  ASSERT_TRUE(cache.WriteRef("main", commit).ok());
  r = ResolveModel("org/model", o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->model_path, cache.SnapshotPath(commit, "m.Q4_0.gguf"));
  EXPECT_EQ(r->name, "org/model");
  EXPECT_FALSE(r->downloaded);
  EXPECT_FALSE(ResolveModel("org/model:other.gguf", o).ok());
}

TEST(ResolveTest, UnreachableHubFallsBackToCache) {
  TempDir dir;
  ResolveOptions o;
  o.hub.cache_dir = dir.path();
  o.hub.endpoint = "http://127.0.0.1:1";  // nothing listens on port 1
  o.hub.connect_timeout_s = 2;
  o.hub.progress = false;
  auto r = ResolveModel("org/model", o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot be reached"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("local path"), std::string::npos);

  // What the cache holds still resolves.
  RepoCache cache(dir.path(), "org/model");
  const std::string commit(40, 'd');
  WriteFile(cache.BlobPath("e2"), "GGUF");
  ASSERT_TRUE(cache.Link(commit, "m.Q8_0.gguf", "e2").ok());
  ASSERT_TRUE(cache.WriteRef("main", commit).ok());
  r = ResolveModel("hf://org/model/m.Q8_0.gguf", o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->model_path, cache.SnapshotPath(commit, "m.Q8_0.gguf"));
}

}  // namespace
}  // namespace tachyon::hub
