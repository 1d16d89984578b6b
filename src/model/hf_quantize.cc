#include "model/hf_quantize.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>

#include "kernels/matmul.h"
#include "model/hf_convert.h"

namespace tachyon::model {

namespace {

constexpr QuantPreset kPresets[] = {
    {"Q8_0", GgmlType::kQ8_0, 7, false},   {"Q4_0", GgmlType::kQ4_0, 2, false},
    {"Q4_K_M", GgmlType::kQ4_K, 15, true}, {"Q5_K_M", GgmlType::kQ5_K, 17, true},
    {"Q6_K", GgmlType::kQ6_K, 18, false},  {"F16", GgmlType::kF16, 1, false},
    {"BF16", GgmlType::kBF16, 32, false},
};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Layer index of "blk.N.<...>", or -1.
int64_t LayerOf(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int64_t il = 0;
  size_t i = 4;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    il = il * 10 + (name[i] - '0');
  }
  return i > 4 ? il : -1;
}

bool Contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool UseMoreBits(int64_t il, int64_t n) {
  return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2;
}

GgmlType Fallback(GgmlType t, int64_t cols) {
  auto fits = [&](GgmlType x) {
    auto tr = GetTypeTraits(static_cast<uint32_t>(x));
    return tr && cols % tr->block_size == 0;
  };
  if (fits(t)) return t;
  GgmlType f = t;
  switch (t) {
    case GgmlType::kQ4_K:
      f = GgmlType::kQ5_0;
      break;
    case GgmlType::kQ5_K:
      f = GgmlType::kQ5_1;
      break;
    case GgmlType::kQ6_K:
      f = GgmlType::kQ8_0;
      break;
    default:
      f = GgmlType::kF16;
      break;
  }
  return fits(f) ? f : GgmlType::kF16;
}

// Writes `in`'s rows of tensor `t` as `type` into `dst`.
Status ConvertTensor(const gguf::GgufFile& in, const gguf::TensorInfo& t, GgmlType type,
                     uint8_t* dst, ThreadPool* pool) {
  const int64_t cols = t.dims[0];
  const int64_t rows = t.NumElements() / cols;
  const uint8_t* src = in.TensorData(t);
  if (type == t.type) {
    std::memcpy(dst, src, t.nbytes);
    return OkStatus();
  }
  if (!kernels::IsSupportedWeightType(t.type) && t.type != GgmlType::kF32) {
    return Unimplemented(in.path() + ": tensor '" + t.name + "' has type " +
                         std::string(TypeName(t.type)) + ", which cannot be re-quantized");
  }
  const size_t in_row = RowBytes(t.type, cols), out_row = RowBytes(type, cols);
  auto work = [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      kernels::DequantizeRow(t.type, src + r * in_row, row.data(), cols);
      kernels::QuantizeRow(type, row.data(), dst + r * out_row, cols);
    }
  };
  if (pool != nullptr && rows > 1) {
    pool->ParallelFor(rows, work);
  } else {
    work(0, rows);
  }
  return OkStatus();
}

}  // namespace

std::optional<QuantPreset> FindQuantPreset(std::string_view name) {
  for (const QuantPreset& p : kPresets) {
    if (EqualsIgnoreCase(p.name, name)) return p;
  }
  return std::nullopt;
}

std::string QuantPresetNames() {
  std::string s;
  for (const QuantPreset& p : kPresets) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

GgmlType ChooseQuantType(const QuantPreset& preset, const std::string& name,
                         const std::vector<int64_t>& dims, int64_t n_layers, bool tied) {
  // The MoE router stays F32 (small, and routing is sensitive to it), and so do the learned
  // position and token-type tables of encoders: llama.cpp adds them to the activations as F32
  // rows, and refuses other types there.
  if (dims.size() < 2 || Contains(name, "ffn_gate_inp") || name == "position_embd.weight" ||
      name == "token_types.weight") {
    return GgmlType::kF32;
  }
  GgmlType t = preset.base;
  const bool is_output = name == "output.weight" || (tied && name == "token_embd.weight");
  if (is_output && preset.mixed) {
    t = GgmlType::kQ6_K;
  } else if (preset.mixed && (Contains(name, "attn_v.") || Contains(name, "ffn_down"))) {
    const int64_t il = LayerOf(name);
    if (il >= 0 && UseMoreBits(il, std::max<int64_t>(n_layers, 1))) t = GgmlType::kQ6_K;
  }
  return Fallback(t, dims[0]);
}

std::optional<QuantPreset> FindLoadQuantization(std::string_view name) {
  if (EqualsIgnoreCase(name, "q8_0")) return FindQuantPreset("Q8_0");
  if (EqualsIgnoreCase(name, "q4_0")) return FindQuantPreset("Q4_0");
  if (EqualsIgnoreCase(name, "q4_k") || EqualsIgnoreCase(name, "q4_k_m")) {
    return FindQuantPreset("Q4_K_M");
  }
  return std::nullopt;
}

Result<QuantizeStats> QuantizeGguf(const gguf::GgufFile& in, const std::string& out_path,
                                   const QuantPreset& preset, ThreadPool* pool, bool float_only) {
  gguf::GgufWriter w;
  w.SetAlignment(in.alignment());
  for (const auto& [key, value] : in.metadata()) w.Set(key, value);
  w.Set("general.file_type", gguf::Value::Uint32(preset.file_type));
  w.Set("general.quantization_version", gguf::Value::Uint32(2));
  const std::string arch = in.Architecture();
  const int64_t n_layers = in.GetInt(arch + ".block_count").value_or(0);
  const bool tied = in.FindTensor("output.weight") == nullptr;
  QuantizeStats stats;
  std::deque<std::vector<uint8_t>> buffers;
  for (const gguf::TensorInfo& t : in.tensors()) {
    const bool is_float =
        t.type == GgmlType::kF32 || t.type == GgmlType::kF16 || t.type == GgmlType::kBF16;
    const GgmlType type =
        float_only && !is_float ? t.type : ChooseQuantType(preset, t.name, t.dims, n_layers, tied);
    const size_t nbytes =
        RowBytes(type, t.dims[0]) * static_cast<size_t>(t.NumElements() / t.dims[0]);
    buffers.emplace_back(nbytes);
    RETURN_IF_ERROR(ConvertTensor(in, t, type, buffers.back().data(), pool));
    Status st = w.AddTensorRef(t.name, type, t.dims, buffers.back().data(), nbytes);
    if (!st.ok()) return st.WithContext(in.path());
    ++stats.n_tensors;
    stats.bytes_in += t.nbytes;
    stats.bytes_out += nbytes;
  }
  RETURN_IF_ERROR(w.WriteFile(out_path));
  return stats;
}

Result<QuantizeStats> QuantizeModelFile(const std::string& in, const std::string& out_path,
                                        const QuantPreset& preset, ThreadPool* pool,
                                        bool float_only) {
  if (!IsHfModelFolder(in)) {
    ASSIGN_OR_RETURN(gguf::GgufFile file, gguf::GgufFile::Open(in));
    return QuantizeGguf(file, out_path, preset, pool, float_only);
  }
  // Convert to a temporary GGUF next to the output (same disk), quantize it, remove it.
  std::string tmp = out_path + ".hf-XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return Unavailable(out_path + ": cannot create a temporary file beside it");
  ::close(fd);
  Result<QuantizeStats> stats = [&]() -> Result<QuantizeStats> {
    {
      ASSIGN_OR_RETURN(std::unique_ptr<HfGguf> conv, HfGguf::Convert(in));
      RETURN_IF_ERROR(conv->writer().WriteFile(tmp));
    }
    ASSIGN_OR_RETURN(gguf::GgufFile file, gguf::GgufFile::Open(tmp));
    return QuantizeGguf(file, out_path, preset, pool, float_only);
  }();
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  return stats;
}

}  // namespace tachyon::model
