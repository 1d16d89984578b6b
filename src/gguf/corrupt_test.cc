// Corrupt-file suite: every malformed input must give a non-OK Status whose one-line message
// names the file and the problem, and never crash (this suite also runs under ASan/UBSan).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "util/testing/testdata.h"

namespace tachyon::gguf {
namespace {

constexpr uint64_t k2p62 = uint64_t{1} << 62;

Result<GgufFile> ParseBytes(const std::string& b) {
  return GgufFile::Parse(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "bad.gguf");
}

// Parses `b`, expects failure with `needle` in a one-line message that names the file.
void ExpectError(const std::string& b, const std::string& needle) {
  auto f = ParseBytes(b);
  ASSERT_FALSE(f.ok()) << "parsed, expected error containing '" << needle << "'";
  const std::string& m = f.status().message();
  EXPECT_NE(m.find(needle), std::string::npos) << "message: " << m;
  EXPECT_EQ(m.rfind("bad.gguf: ", 0), 0u) << "message: " << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << "message: " << m;
}

// Little-endian byte builder for hand-made (and deliberately broken) files.
struct Raw {
  std::string b;
  Raw& U8(uint8_t v) { return Put(&v, 1); }
  Raw& U32(uint32_t v) { return Put(&v, 4); }
  Raw& U64(uint64_t v) { return Put(&v, 8); }
  Raw& Str(const std::string& s) {
    U64(s.size());
    b += s;
    return *this;
  }
  Raw& Header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    b += "GGUF";
    U32(version);
    U64(n_tensors);
    return U64(n_kv);
  }
  Raw& KvU32(const std::string& key, uint32_t v) { return Str(key).U32(4).U32(v); }
  Raw& Tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) U64(d);
    return U32(type).U64(offset);
  }
  Raw& Pad(size_t align) {
    b.resize((b.size() + align - 1) / align * align, '\0');
    return *this;
  }
  Raw& Zeros(size_t n) {
    b.append(n, '\0');
    return *this;
  }
  Raw& Put(const void* p, size_t n) {
    b.append(static_cast<const char*>(p), n);
    return *this;
  }
};

// A valid file with every kind of section: scalars, strings, nested arrays, 3 tensors.
std::string ValidFile() {
  GgufWriter w;
  w.Set("general.architecture", Value::String("llama"));
  w.Set("llama.block_count", Value::Uint32(2));
  w.Set("f", Value::Float32(0.5f));
  w.Set("strs", Value::StringArray({"a", "bc", "def"}));
  w.Set("nested", Value::Array(ValueType::kArray, {Value::Int32Array({1, 2})}));
  w.Set("flag", Value::Bool(true));
  std::vector<uint8_t> data(34 * 4, 7);
  EXPECT_TRUE(w.AddTensor("a", GgmlType::kF32, {5}, data.data(), 20).ok());
  EXPECT_TRUE(w.AddTensor("b", GgmlType::kQ8_0, {32, 2}, data.data(), 68).ok());
  EXPECT_TRUE(w.AddTensor("c", GgmlType::kF16, {3, 1, 2}, data.data(), 12).ok());
  return w.Serialize();
}

TEST(GgufCorrupt, ValidFileParses) {
  auto f = ParseBytes(ValidFile());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->tensors().size(), 3u);
}

// Truncating at every byte offset fails with "truncated" up to the end of the last tensor's
// data; past it only padding is missing and the file is still complete.
TEST(GgufCorrupt, TruncatedAtEveryByte) {
  const std::string full = ValidFile();
  auto f = ParseBytes(full);
  ASSERT_TRUE(f.ok());
  size_t data_end = 0;
  for (const TensorInfo& t : f->tensors()) {
    data_end = std::max<size_t>(data_end, f->data_offset() + t.offset + t.nbytes);
  }
  for (size_t len = 0; len < full.size(); ++len) {
    const std::string cut = full.substr(0, len);
    if (len < data_end) {
      SCOPED_TRACE("truncated to " + std::to_string(len));
      ExpectError(cut, "truncated");
    } else {
      EXPECT_TRUE(ParseBytes(cut).ok()) << len;
    }
  }
}

// At section boundaries the message names the section that is cut.
TEST(GgufCorrupt, TruncatedAtSectionBoundaries) {
  Raw r;
  r.Header(1, 2).KvU32("k0", 1);
  const size_t after_kv0 = r.b.size();
  r.Str("k1").U32(8).Str("hello");
  const size_t after_kvs = r.b.size();
  r.Tensor("t", {8}, 0, 0);
  const size_t after_infos = r.b.size();
  r.Pad(32);
  const size_t data_start = r.b.size();
  r.Zeros(32);
  ASSERT_TRUE(ParseBytes(r.b).ok());
  ExpectError("", "(magic) needs 4 bytes at offset 0, file has 0");
  ExpectError(r.b.substr(0, 4), "header (version)");
  ExpectError(r.b.substr(0, 8), "header (tensor_count)");
  ExpectError(r.b.substr(0, 16), "header (kv_count)");
  // Too few bytes left for the counts: caught before any item is read.
  ExpectError(r.b.substr(0, 24), "truncated or corrupt header: kv_count 2");
  ExpectError(r.b.substr(0, after_kv0), "truncated or corrupt header: kv_count 2");
  ExpectError(r.b.substr(0, after_kvs - 2), "metadata 1 'k1' (string value)");
  ExpectError(r.b.substr(0, after_kvs), "tensor info 0 (name) needs 8 bytes");
  ExpectError(r.b.substr(0, after_kvs + 9), "tensor info 0 't' (n_dims)");
  ExpectError(r.b.substr(0, after_kvs + 13), "tensor info 0 't' (dims)");
  ExpectError(r.b.substr(0, after_kvs + 21), "tensor info 0 't' (type)");
  ExpectError(r.b.substr(0, after_kvs + 25), "tensor info 0 't' (offset)");
  ExpectError(r.b.substr(0, after_infos),
              "data section starts at offset " + std::to_string(data_start));
  ExpectError(r.b.substr(0, data_start + 31), "tensor 0 't' data");
}

TEST(GgufCorrupt, BadMagicAndVersions) {
  std::string b = ValidFile();
  std::string bad = b;
  bad[0] = 'X';
  ExpectError(bad, "not a GGUF file (bad magic");
  ExpectError("GGU", "truncated");
  for (uint32_t version : {0u, 1u, 4u, 999u, 0x03000000u}) {
    std::string v = b;
    std::memcpy(&v[4], &version, 4);
    SCOPED_TRACE(version);
    ExpectError(v, "version " + std::to_string(version));
  }
  std::string be = b;
  const uint32_t be3 = 0x03000000u;
  std::memcpy(&be[4], &be3, 4);
  ExpectError(be, "big-endian");
  // Version 2 has the same layout as 3 and is accepted.
  std::string v2 = b;
  v2[4] = 2;
  auto f = ParseBytes(v2);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->version(), 2u);
}

TEST(GgufCorrupt, AbsurdCounts) {
  ExpectError(Raw().Header(k2p62, 0).Zeros(100).b, "tensor_count 4611686018427387904");
  ExpectError(Raw().Header(0, k2p62).Zeros(100).b, "kv_count 4611686018427387904");
  ExpectError(Raw().Header(~uint64_t{0}, ~uint64_t{0}).b, "count");
  // Counts that fit the file size bound but whose items are missing.
  ExpectError(Raw().Header(0, 3).KvU32("a", 1).Zeros(30).b, "metadata 1");
  // Key / string value / array lengths of 2^62.
  ExpectError(Raw().Header(0, 1).U64(k2p62).Zeros(40).b,
              "metadata 0 (key): string length 4611686018427387904");
  ExpectError(Raw().Header(0, 1).Str("k").U32(8).U64(k2p62).Zeros(40).b,
              "metadata 0 'k' (string value): string length 4611686018427387904");
  ExpectError(Raw().Header(0, 1).Str("k").U32(9).U32(0).U64(k2p62).Zeros(40).b,
              "array length 4611686018427387904");
  ExpectError(Raw().Header(0, 1).Str("k").U32(9).U32(8).U64(k2p62).Zeros(40).b,
              "array length 4611686018427387904 of string");
  // An array whose strings are cut: the element index is named.
  ExpectError(Raw().Header(0, 1).Str("k").U32(9).U32(8).U64(3).Str("x").Str("y").U64(50).b,
              "metadata 0 'k' element 2 (string value)");
  ExpectError(Raw().Header(1, 0).Str("t").U32(uint32_t{1} << 31).Zeros(64).b, "n_dims 2147483648");
  ExpectError(Raw().Header(1, 0).Str("t").U32(5).Zeros(64).b, "n_dims 5");
  ExpectError(Raw().Header(1, 0).Str("t").U32(0).Zeros(64).b, "n_dims 0");
  ExpectError(Raw().Header(1, 0).U64(k2p62).Zeros(64).b, "tensor info 0 (name): string length");
}

TEST(GgufCorrupt, MetadataErrors) {
  ExpectError(Raw().Header(0, 1).Str("k").U32(13).Zeros(16).b, "unknown value type 13");
  ExpectError(Raw().Header(0, 1).Str("k").U32(9).U32(77).U64(1).Zeros(16).b,
              "unknown array element type 77");
  ExpectError(Raw().Header(0, 1).Str("k").U32(7).U8(2).Zeros(16).b, "bad bool value 2");
  ExpectError(Raw().Header(0, 2).KvU32("k", 1).KvU32("k", 2).b, "metadata 1 'k': duplicate key");
  ExpectError(Raw().Header(0, 1).Str("").U32(4).U32(1).b, "empty key");
  // Arrays nested deeper than the limit.
  Raw deep;
  deep.Header(0, 1).Str("k").U32(9);
  for (int d = 0; d < kMaxArrayDepth + 1; ++d) deep.U32(9).U64(1);
  deep.U32(4).U64(1).U32(0).Zeros(16);
  ExpectError(deep.b, "nested deeper than");
  // Exactly at the limit is fine.
  Raw ok;
  ok.Header(0, 1).Str("k").U32(9);
  for (int d = 0; d < kMaxArrayDepth - 1; ++d) ok.U32(9).U64(1);
  ok.U32(4).U64(1).U32(42);
  auto f = ParseBytes(ok.b);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  // More array elements in all than the reader keeps.
  Raw big;
  big.Header(0, 1).Str("k").U32(9).U32(0).U64(kMaxMetadataElements + 1);
  big.Zeros(kMaxMetadataElements + 1);
  ExpectError(big.b, "too many metadata array elements");
}

TEST(GgufCorrupt, TensorInfoErrors) {
  auto file = [](std::vector<uint64_t> dims, uint32_t type, uint64_t offset,
                 size_t data_bytes = 4096) {
    return Raw().Header(1, 0).Tensor("w", dims, type, offset).Pad(32).Zeros(data_bytes).b;
  };
  ASSERT_TRUE(ParseBytes(file({4, 4}, 0, 0)).ok());
  ExpectError(file({4, 0}, 0, 0), "dim 1 is 0");
  ExpectError(file({~uint64_t{0}}, 0, 0), "dim 0 is -1");
  ExpectError(file({uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0), "overflows int64");
  ExpectError(file({4}, 4, 0), "unknown tensor type 4");
  ExpectError(file({4}, 1000, 0), "unknown tensor type 1000");
  ExpectError(file({48}, 2, 0), "dims[0] = 48 is not a multiple of the Q4_0 block size 32");
  ExpectError(file({4}, 0, 16), "offset 16 is not a multiple of the alignment 32");
  ExpectError(file({4}, 0, 4096), "runs past the end of the file");
  ExpectError(file({4}, 0, uint64_t{1} << 63), "runs past the end of the file");
  ExpectError(file({1024, 2}, 0, 0), "runs past the end of the file");
  // Duplicate and overlapping tensors; empty name.
  ExpectError(Raw().Header(2, 0).Tensor("w", {4}, 0, 0).Tensor("w", {4}, 0, 32).Pad(32).Zeros(64).b,
              "tensor info 1 'w': duplicate tensor name");
  ExpectError(
      Raw().Header(2, 0).Tensor("a", {16}, 0, 32).Tensor("b", {16}, 0, 0).Pad(32).Zeros(128).b,
      "tensors 'b' [0, +64) and 'a' [32, +64) overlap");
  ExpectError(Raw().Header(1, 0).Tensor("", {4}, 0, 0).Pad(32).Zeros(64).b, "empty tensor name");
}

TEST(GgufCorrupt, Alignment) {
  auto file = [](Raw kv) {
    Raw r;
    r.Header(1, 1);
    r.b += kv.b;
    return r.Tensor("w", {4}, 0, 0).Pad(64).Zeros(64).b;
  };
  ExpectError(file(Raw().KvU32("general.alignment", 0)), "general.alignment must be");
  ExpectError(file(Raw().KvU32("general.alignment", 3)), "general.alignment must be");
  ExpectError(file(Raw().Str("general.alignment").U32(8).Str("32")), "general.alignment must be");
  ExpectError(file(Raw().Str("general.alignment").U32(5).U32(static_cast<uint32_t>(-32))),
              "general.alignment must be");
  ExpectError(file(Raw().Str("general.alignment").U32(10).U64(uint64_t{1} << 63)),
              "general.alignment");
  // Any integer type with a power-of-two value is accepted.
  auto f = ParseBytes(file(Raw().Str("general.alignment").U32(10).U64(64)));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  auto g = ParseBytes(file(Raw().Str("general.alignment").U32(1).U8(16)));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->alignment(), 16u);
}

TEST(GgufCorrupt, VocabOnlyFileWithoutPaddingIsValid) {
  const std::string b = Raw().Header(0, 1).Str("tokenizer.ggml.model").U32(8).Str("gpt2").b;
  auto f = ParseBytes(b);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->GetString("tokenizer.ggml.model"), "gpt2");
}

// Single-byte corruptions of a real model at many positions: parse fails cleanly or
// succeeds, never crashes (ASan checks the reads).
TEST(GgufCorrupt, ByteFlipsOfRealFile) {
  const std::string td = TestdataDir();
  if (td.empty()) GTEST_SKIP() << "../shared/testdata not found (set TACHYON_TESTDATA)";
  auto orig = ReadFileToString(td + "/models/models/tiny-qwen3-Q4_K_M.gguf");
  ASSERT_TRUE(orig.ok()) << orig.status().ToString();
  auto f = ParseBytes(*orig);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const size_t header_end = f->data_offset();
  int failures = 0;
  for (size_t pos = 0; pos < header_end; pos += 11) {
    for (uint8_t x : {uint8_t{0xff}, uint8_t{0x80}, uint8_t{0x01}}) {
      std::string b = orig->substr(0, header_end + 4096);
      b[pos] = static_cast<char>(b[pos] ^ x);
      auto g = ParseBytes(b);
      if (!g.ok()) {
        ++failures;
        EXPECT_EQ(g.status().message().rfind("bad.gguf: ", 0), 0u);
      }
    }
  }
  EXPECT_GT(failures, 0);
  // Truncated at many offsets: always an error naming the truncation.
  for (size_t len = 0; len < header_end; len += 97) {
    ExpectError(orig->substr(0, len), "truncated");
  }
}

TEST(GgufCorrupt, OpenEmptyAndDirectory) {
  const std::string path = ::testing::TempDir() + "/corrupt_test_empty.gguf";
  ASSERT_TRUE(GgufWriter().WriteFile(path).ok());
  // A writer with nothing added still writes a valid (empty) GGUF.
  ASSERT_TRUE(GgufFile::Open(path).ok());
  std::FILE* fp = std::fopen(path.c_str(), "wb");
  ASSERT_NE(fp, nullptr);
  std::fclose(fp);
  auto f = GgufFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find(path + ": truncated"), std::string::npos)
      << f.status().message();
  std::remove(path.c_str());
  auto d = GgufFile::Open(::testing::TempDir());
  ASSERT_FALSE(d.ok());
}

}  // namespace
}  // namespace tachyon::gguf
