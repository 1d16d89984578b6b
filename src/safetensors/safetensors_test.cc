#include "safetensors/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace tachyon::safetensors {
namespace {

// A file with the given raw JSON header and `data_bytes` zero bytes of data.
std::string RawFile(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\0');
}

Result<SafetensorsFile> ParseString(const std::string& s) {
  return SafetensorsFile::Parse(reinterpret_cast<const uint8_t*>(s.data()), s.size(), "t.st");
}

std::string Error(const std::string& s) {
  auto r = ParseString(s);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().message();
}

TEST(SafetensorsTest, WriteThenRead) {
  Writer w;
  w.SetMetadata("format", "pt");
  const float a[6] = {1, 2, 3, 4, 5, 6};
  const uint16_t b[2] = {0x3c00, 0xc000};  // F16 1.0, -2.0
  const int64_t c[1] = {-7};
  ASSERT_TRUE(w.Add("a", Dtype::kF32, {2, 3}, a, sizeof(a)).ok());
  ASSERT_TRUE(w.Add("b", Dtype::kF16, {2}, b, sizeof(b)).ok());
  ASSERT_TRUE(w.Add("c", Dtype::kI64, {1}, c, sizeof(c)).ok());
  ASSERT_TRUE(w.Add("empty", Dtype::kBF16, {0, 4}, nullptr, 0).ok());
  const std::string bytes = w.Serialize();
  auto f = ParseString(bytes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_EQ(f->tensors().size(), 4u);
  const TensorInfo* ta = f->Find("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ta->NumElements(), 6);
  EXPECT_EQ(std::memcmp(f->Data(*ta), a, sizeof(a)), 0);
  float out[2];
  const TensorInfo* tb = f->Find("b");
  ASSERT_TRUE(ToF32(tb->dtype, f->Data(*tb), out, 2).ok());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  const TensorInfo* tc = f->Find("c");
  ASSERT_TRUE(ToF32(tc->dtype, f->Data(*tc), out, 1).ok());
  EXPECT_EQ(out[0], -7.0f);
  EXPECT_EQ(f->Find("nope"), nullptr);
}

TEST(SafetensorsTest, AllDtypesParse) {
  for (const char* name : {"F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64", "U8", "BOOL",
                           "F8_E4M3", "F8_E5M2"}) {
    std::optional<Dtype> d = ParseDtype(name);
    ASSERT_TRUE(d.has_value()) << name;
    EXPECT_EQ(DtypeName(*d), name);
    const size_t n = DtypeSize(*d) * 3;
    auto f = ParseString(RawFile(std::string("{\"x\":{\"dtype\":\"") + name +
                                     "\",\"shape\":[3],\"data_offsets\":[0," +
                                     std::to_string(n) + "]}}",
                                 n));
    EXPECT_TRUE(f.ok()) << name << ": " << f.status().ToString();
  }
  EXPECT_FALSE(ParseDtype("Q4_0").has_value());
  float out;
  EXPECT_FALSE(ToF32(Dtype::kF8E4M3, reinterpret_cast<const uint8_t*>("x"), &out, 1).ok());
}

TEST(SafetensorsTest, WriterRejectsBadInput) {
  Writer w;
  float x[2] = {};
  EXPECT_FALSE(w.Add("a", Dtype::kF32, {3}, x, sizeof(x)).ok());
  EXPECT_TRUE(w.Add("a", Dtype::kF32, {2}, x, sizeof(x)).ok());
  EXPECT_FALSE(w.Add("a", Dtype::kF32, {2}, x, sizeof(x)).ok());
  EXPECT_FALSE(w.Add("", Dtype::kF32, {2}, x, sizeof(x)).ok());
}

TEST(SafetensorsCorruptTest, TruncatedHeaderLength) {
  EXPECT_NE(Error(std::string("\x05\x00\x00", 3)).find("too short"), std::string::npos);
  EXPECT_NE(Error("").find("t.st"), std::string::npos);
}

TEST(SafetensorsCorruptTest, EveryTruncationFails) {
  Writer w;
  const float a[3] = {1, 2, 3};
  ASSERT_TRUE(w.Add("a", Dtype::kF32, {3}, a, sizeof(a)).ok());
  ASSERT_TRUE(w.Add("b", Dtype::kF32, {1, 3}, a, sizeof(a)).ok());
  const std::string full = w.Serialize();
  ASSERT_TRUE(ParseString(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    EXPECT_FALSE(ParseString(full.substr(0, n)).ok()) << "prefix of " << n << " bytes";
  }
}

TEST(SafetensorsCorruptTest, HeaderPastEnd) {
  std::string s = RawFile("{}", 0);
  s.resize(s.size() - 1);  // header cut short
  EXPECT_NE(Error(s).find("past the end"), std::string::npos);
}

TEST(SafetensorsCorruptTest, AbsurdHeaderLength) {
  std::string s(8, '\xff');
  s += "{}";
  EXPECT_NE(Error(s).find("exceeds the limit"), std::string::npos);
}

TEST(SafetensorsCorruptTest, BadJson) {
  EXPECT_NE(Error(RawFile("{\"a\":", 0)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(Error(RawFile("[1,2]", 0)).find("not a JSON object"), std::string::npos);
  EXPECT_NE(Error(RawFile("{\"a\":3}", 0)).find("'a'"), std::string::npos);
  EXPECT_NE(Error(RawFile("{\"__metadata__\":{\"k\":1}}", 0)).find("__metadata__"),
            std::string::npos);
}

TEST(SafetensorsCorruptTest, FieldErrors) {
  EXPECT_NE(Error(RawFile(R"({"w":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}})", 4))
                .find("unsupported dtype"),
            std::string::npos);
  EXPECT_NE(Error(RawFile(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4))
                .find("shape"),
            std::string::npos);
  EXPECT_NE(Error(RawFile(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4))
                .find("data_offsets"),
            std::string::npos);
  EXPECT_NE(Error(RawFile(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4)).find("dtype"),
            std::string::npos);
}

TEST(SafetensorsCorruptTest, OffsetsPastEnd) {
  const std::string e =
      Error(RawFile(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4));
  EXPECT_NE(e.find("past the data section"), std::string::npos) << e;
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
}

TEST(SafetensorsCorruptTest, BeginAfterEnd) {
  EXPECT_NE(Error(RawFile(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 8))
                .find("begin"),
            std::string::npos);
}

TEST(SafetensorsCorruptTest, SizeMismatch) {
  EXPECT_NE(Error(RawFile(R"({"w":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}})", 8))
                .find("need 6"),
            std::string::npos);
  // Overflowing shape product.
  EXPECT_FALSE(ParseString(RawFile(
      R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0)).ok());
}

TEST(SafetensorsCorruptTest, Overlap) {
  const std::string e = Error(RawFile(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12));
  EXPECT_NE(e.find("overlap"), std::string::npos) << e;
}

class ShardedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("st_sharded_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void WriteText(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(ShardedTest, IndexMapsTensorsToShards) {
  float x[2] = {1, 2}, y[3] = {3, 4, 5};
  Writer a, b;
  ASSERT_TRUE(a.Add("x", Dtype::kF32, {2}, x, sizeof(x)).ok());
  ASSERT_TRUE(b.Add("y", Dtype::kF32, {3}, y, sizeof(y)).ok());
  ASSERT_TRUE(a.WriteFile((dir_ / "m-1.safetensors").string()).ok());
  ASSERT_TRUE(b.WriteFile((dir_ / "m-2.safetensors").string()).ok());
  WriteText("model.safetensors.index.json",
            R"({"metadata":{},"weight_map":{"x":"m-1.safetensors","y":"m-2.safetensors"}})");
  auto m = SafetensorsModel::Open(dir_.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->shards().size(), 2u);
  EXPECT_EQ(m->TensorNames(), (std::vector<std::string>{"x", "y"}));
  auto e = m->Find("y");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(std::memcmp(e->data(), y, sizeof(y)), 0);
  EXPECT_FALSE(m->Find("z").has_value());

  // A tensor listed in the wrong shard.
  WriteText("model.safetensors.index.json",
            R"({"weight_map":{"x":"m-2.safetensors"}})");
  auto bad = SafetensorsModel::Open(dir_.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'x'"), std::string::npos);
  // A shard outside the folder.
  WriteText("model.safetensors.index.json", R"({"weight_map":{"x":"../m-1.safetensors"}})");
  EXPECT_FALSE(SafetensorsModel::Open(dir_.string()).ok());
  // A missing shard.
  WriteText("model.safetensors.index.json", R"({"weight_map":{"x":"m-9.safetensors"}})");
  EXPECT_FALSE(SafetensorsModel::Open(dir_.string()).ok());
  WriteText("model.safetensors.index.json", R"({"weight_map":)");
  EXPECT_FALSE(SafetensorsModel::Open(dir_.string()).ok());
}

TEST_F(ShardedTest, SingleFileFolder) {
  float x[2] = {1, 2};
  Writer a;
  ASSERT_TRUE(a.Add("x", Dtype::kF32, {2}, x, sizeof(x)).ok());
  ASSERT_TRUE(a.WriteFile((dir_ / "model.safetensors").string()).ok());
  auto m = SafetensorsModel::Open(dir_.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->Find("x").has_value());
  auto direct = SafetensorsModel::Open((dir_ / "model.safetensors").string());
  ASSERT_TRUE(direct.ok());
  EXPECT_TRUE(direct->Find("x").has_value());
  EXPECT_FALSE(SafetensorsModel::Open((dir_ / "none").string()).ok());
}

}  // namespace
}  // namespace tachyon::safetensors
