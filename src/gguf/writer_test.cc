// GgufWriter round trips: every value type, nested arrays, tensors of several types and
// alignments, the byte layout, atomic file writes and argument validation.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace tachyon::gguf {
namespace {

Result<GgufFile> ParseString(const std::string& bytes) {
  return GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "mem.gguf");
}

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = static_cast<uint8_t>(seed + k * 31 + (k >> 8));
  return v;
}

TEST(GgufWriter, EveryScalarTypeRoundTrips) {
  GgufWriter w;
  w.Set("u8", Value::Uint8(250));
  w.Set("i8", Value::Int8(-100));
  w.Set("u16", Value::Uint16(65000));
  w.Set("i16", Value::Int16(-32000));
  w.Set("u32", Value::Uint32(4000000000u));
  w.Set("i32", Value::Int32(-2000000000));
  w.Set("u64", Value::Uint64(std::numeric_limits<uint64_t>::max()));
  w.Set("i64", Value::Int64(std::numeric_limits<int64_t>::min()));
  w.Set("f32", Value::Float32(1.5e-5f));
  w.Set("f64", Value::Float64(3.141592653589793));
  w.Set("bool_t", Value::Bool(true));
  w.Set("bool_f", Value::Bool(false));
  w.Set("str", Value::String(std::string("h\xc3\xa9llo\0world", 12)));
  w.Set("empty_str", Value::String(""));
  const std::string bytes = w.Serialize();
  auto f = ParseString(bytes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_TRUE(f->tensors().empty());
  ASSERT_EQ(f->metadata().size(), 14u);
  EXPECT_EQ(f->metadata()[0].first, "u8");  // insertion order kept
  EXPECT_EQ(f->metadata()[13].first, "empty_str");
  EXPECT_EQ(f->Find("u8")->type, ValueType::kUint8);
  EXPECT_EQ(f->GetInt("u8"), 250);
  EXPECT_EQ(f->GetInt("i8"), -100);
  EXPECT_EQ(f->GetInt("u16"), 65000);
  EXPECT_EQ(f->GetInt("i16"), -32000);
  EXPECT_EQ(f->GetInt("u32"), 4000000000LL);
  EXPECT_EQ(f->GetInt("i32"), -2000000000);
  EXPECT_EQ(f->Find("u64")->u, std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE(f->GetInt("u64").has_value());  // does not fit int64
  EXPECT_EQ(f->GetInt("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->Find("f32")->type, ValueType::kFloat32);
  EXPECT_EQ(static_cast<float>(*f->GetFloat("f32")), 1.5e-5f);
  EXPECT_EQ(*f->GetFloat("f64"), 3.141592653589793);
  EXPECT_EQ(f->GetFloat("u16"), 65000.0);  // integers read as floats too
  EXPECT_EQ(f->GetBool("bool_t"), true);
  EXPECT_EQ(f->GetBool("bool_f"), false);
  EXPECT_EQ(f->GetString("str"), std::string("h\xc3\xa9llo\0world", 12));
  EXPECT_EQ(f->GetString("empty_str"), "");
  EXPECT_FALSE(f->GetString("u8").has_value());
  EXPECT_FALSE(f->GetBool("u8").has_value());
}

TEST(GgufWriter, ArraysAndNestedArraysRoundTrip) {
  GgufWriter w;
  w.Set("strs", Value::StringArray({"a", "", "long string with spaces"}));
  w.Set("f32s", Value::Float32Array({0.5f, -1.25f, 1e30f}));
  w.Set("i32s", Value::Int32Array({-1, 0, 7}));
  w.Set("empty", Value::Array(ValueType::kUint64, {}));
  w.Set("bools", Value::Array(ValueType::kBool, {Value::Bool(true), Value::Bool(false)}));
  std::vector<Value> inner = {Value::Int32Array({1, 2}), Value::Int32Array({}),
                              Value::Int32Array({3})};
  std::vector<Value> outer = {Value::Array(ValueType::kArray, inner),
                              Value::Array(ValueType::kArray, {})};
  w.Set("nested", Value::Array(ValueType::kArray, outer));
  auto f = ParseString(w.Serialize());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const Value* s = f->Find("strs");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->elem_type, ValueType::kString);
  ASSERT_EQ(s->arr.size(), 3u);
  EXPECT_EQ(s->arr[2].s, "long string with spaces");
  const Value* fl = f->Find("f32s");
  ASSERT_EQ(fl->arr.size(), 3u);
  EXPECT_EQ(fl->arr[1].f, -1.25);
  EXPECT_EQ(static_cast<float>(fl->arr[2].f), 1e30f);
  EXPECT_EQ(f->Find("i32s")->arr[0].i, -1);
  EXPECT_EQ(f->GetArraySize("empty"), 0u);
  EXPECT_EQ(f->Find("empty")->elem_type, ValueType::kUint64);
  EXPECT_EQ(f->Find("bools")->arr[0].u, 1u);
  const Value* n = f->Find("nested");
  ASSERT_EQ(n->elem_type, ValueType::kArray);
  ASSERT_EQ(n->arr.size(), 2u);
  ASSERT_EQ(n->arr[0].arr.size(), 3u);
  EXPECT_EQ(n->arr[0].arr[0].arr[1].i, 2);
  EXPECT_TRUE(n->arr[0].arr[1].arr.empty());
  EXPECT_EQ(n->arr[0].arr[2].arr[0].i, 3);
  EXPECT_TRUE(n->arr[1].arr.empty());
  EXPECT_EQ(n->ToString(), "[[[1, 2], [], [3]], []]");
}

TEST(GgufWriter, SetReplacesInPlace) {
  GgufWriter w;
  w.Set("a", Value::Uint32(1));
  w.Set("b", Value::Uint32(2));
  w.Set("a", Value::String("x"));
  auto f = ParseString(w.Serialize());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].first, "a");
  EXPECT_EQ(f->GetString("a"), "x");
}

// Tensors of several types and shapes, at several alignments: data lands aligned, intact.
TEST(GgufWriter, TensorsRoundTripAtEveryAlignment) {
  struct Spec {
    const char* name;
    GgmlType type;
    std::vector<int64_t> dims;
  };
  const std::vector<Spec> specs = {
      {"f32", GgmlType::kF32, {3}},
      {"f16", GgmlType::kF16, {5, 3}},
      {"q8_0", GgmlType::kQ8_0, {64, 2}},
      {"q4_k", GgmlType::kQ4_K, {256, 1, 3}},
      {"bf16", GgmlType::kBF16, {2, 2, 2, 2}},
      {"q6_k", GgmlType::kQ6_K, {512}},
  };
  for (size_t align : {1u, 8u, 32u, 64u, 4096u}) {
    GgufWriter w;
    w.Set("general.architecture", Value::String("test"));
    w.SetAlignment(align);
    std::vector<std::vector<uint8_t>> datas;
    for (size_t k = 0; k < specs.size(); ++k) {
      const auto& s = specs[k];
      int64_t rows = 1;
      for (size_t d = 1; d < s.dims.size(); ++d) rows *= s.dims[d];
      const size_t nbytes = RowBytes(s.type, s.dims[0]) * static_cast<size_t>(rows);
      datas.push_back(Pattern(nbytes, static_cast<uint8_t>(k)));
      ASSERT_TRUE(w.AddTensor(s.name, s.type, s.dims, datas.back().data(), nbytes).ok());
    }
    const std::string bytes = w.Serialize();
    auto f = ParseString(bytes);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->alignment(), align);
    EXPECT_EQ(f->GetInt("general.alignment").value_or(32), static_cast<int64_t>(align));
    EXPECT_EQ(f->data_offset() % align, 0u);
    ASSERT_EQ(f->tensors().size(), specs.size());
    for (size_t k = 0; k < specs.size(); ++k) {
      const TensorInfo& t = f->tensors()[k];
      EXPECT_EQ(t.name, specs[k].name);
      EXPECT_EQ(t.type, specs[k].type);
      EXPECT_EQ(t.dims, specs[k].dims);
      EXPECT_EQ(t.offset % align, 0u);
      ASSERT_EQ(t.nbytes, datas[k].size());
      EXPECT_EQ(std::memcmp(f->TensorData(t), datas[k].data(), t.nbytes), 0) << t.name;
    }
    // The file ends right after the last tensor's padded data.
    EXPECT_EQ(bytes.size() % align, 0u);
  }
}

// The exact bytes of a small file, written out by hand from the format description.
TEST(GgufWriter, ByteLayoutIsStandardGguf) {
  GgufWriter w;
  w.Set("k", Value::Uint32(7));
  const float data[2] = {1.0f, 2.0f};
  ASSERT_TRUE(w.AddTensor("t", GgmlType::kF32, {2}, data, sizeof(data)).ok());
  const std::string b = w.Serialize();
  std::string expect;
  auto put = [&](const void* p, size_t n) { expect.append(static_cast<const char*>(p), n); };
  auto u32 = [&](uint32_t v) { put(&v, 4); };
  auto u64 = [&](uint64_t v) { put(&v, 8); };
  expect += "GGUF";
  u32(3);
  u64(1);  // tensors
  u64(1);  // kv
  u64(1);
  expect += "k";
  u32(4);  // u32
  u32(7);
  u64(1);
  expect += "t";
  u32(1);
  u64(2);
  u32(0);  // F32
  u64(0);
  ASSERT_EQ(expect.size(), 74u);
  expect.resize(96, '\0');  // padded to the alignment 32
  put(data, sizeof(data));
  expect.resize(128, '\0');
  EXPECT_EQ(b, expect);
}

TEST(GgufWriter, WriteFileIsAtomicAndReadable) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/writer_test_" + std::to_string(::getpid()) + ".gguf";
  GgufWriter w;
  w.Set("general.architecture", Value::String("llama"));
  const std::vector<uint8_t> q = Pattern(34 * 4, 9);
  ASSERT_TRUE(w.AddTensorRef("w", GgmlType::kQ8_0, {32, 4}, q.data(), q.size()).ok());
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->Architecture(), "llama");
  EXPECT_EQ(std::memcmp(f->TensorData(f->tensors()[0]), q.data(), q.size()), 0);
  EXPECT_EQ(w.Serialize().size(), std::filesystem::file_size(path));
  // No temp file left behind.
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().string().find(path + ".tmp") == 0) ++n;
  }
  EXPECT_EQ(n, 0);
  std::filesystem::remove(path);
  // A directory that does not exist: error naming the path.
  Status st = w.WriteFile("/nonexistent/dir/out.gguf");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent/dir/out.gguf"), std::string::npos);
}

TEST(GgufWriter, RejectsBadTensors) {
  GgufWriter w;
  const std::vector<uint8_t> buf(4096);
  auto add = [&](const std::string& name, GgmlType type, std::vector<int64_t> dims, size_t nbytes) {
    return w.AddTensor(name, type, dims, buf.data(), nbytes);
  };
  ASSERT_TRUE(add("ok", GgmlType::kF32, {4}, 16).ok());
  EXPECT_NE(add("ok", GgmlType::kF32, {4}, 16).message().find("duplicate"), std::string::npos);
  EXPECT_NE(add("", GgmlType::kF32, {4}, 16).message().find("empty"), std::string::npos);
  EXPECT_NE(add(std::string(64, 'x'), GgmlType::kF32, {4}, 16).message().find("longer"),
            std::string::npos);
  EXPECT_NE(add("t", static_cast<GgmlType>(4), {4}, 16).message().find("unknown type"),
            std::string::npos);
  EXPECT_NE(add("t", GgmlType::kF32, {}, 16).message().find("dims"), std::string::npos);
  EXPECT_NE(add("t", GgmlType::kF32, {1, 1, 1, 1, 1}, 4).message().find("dims"), std::string::npos);
  EXPECT_NE(add("t", GgmlType::kF32, {0}, 0).message().find("<= 0"), std::string::npos);
  EXPECT_NE(add("t", GgmlType::kQ4_0, {48}, 36).message().find("block size"), std::string::npos);
  EXPECT_NE(add("t", GgmlType::kF32, {4}, 15).message().find("needs 16"), std::string::npos);
  EXPECT_FALSE(add("t", GgmlType::kF32, {int64_t{1} << 40, int64_t{1} << 40}, 0).ok());
}

TEST(GgufWriter, SetAlignmentViaMetadata) {
  GgufWriter w;
  w.Set("general.alignment", Value::Uint64(128));
  const float x = 1;
  ASSERT_TRUE(w.AddTensor("t", GgmlType::kF32, {1}, &x, 4).ok());
  auto f = ParseString(w.Serialize());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->alignment(), 128u);
  EXPECT_EQ(f->data_offset() % 128, 0u);
}

}  // namespace
}  // namespace tachyon::gguf
