#include "model/config.h"

#include <cmath>
#include <numbers>

namespace tachyon::model {

namespace {
// Bounds that keep a hostile file from asking for absurd allocations.
constexpr int64_t kMaxDim = 1 << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 4096;
}  // namespace

Result<int64_t> ArchKeys::RequireInt(const std::string& suffix, int64_t max) const {
  const std::string key = Key(suffix);
  std::optional<int64_t> v = file_.GetInt(key);
  if (!v) {
    return InvalidArgument(file_.path() + ": missing or non-integer metadata key " + key);
  }
  if (*v <= 0 || *v > max) {
    return InvalidArgument(file_.path() + ": metadata " + key + " = " + std::to_string(*v) +
                           " is out of range [1, " + std::to_string(max) + "]");
  }
  return *v;
}

Result<int64_t> ArchKeys::OptionalInt(const std::string& suffix, int64_t def, int64_t max) const {
  if (!Has(suffix)) return def;
  const std::string key = Key(suffix);
  std::optional<int64_t> v = file_.GetInt(key);
  if (!v || *v < 0 || *v > max) {
    return InvalidArgument(file_.path() + ": metadata " + key + " must be an integer in [0, " +
                           std::to_string(max) + "]");
  }
  return *v;
}

Result<float> ArchKeys::OptionalFloat(const std::string& suffix, float def) const {
  if (!Has(suffix)) return def;
  std::optional<double> v = file_.GetFloat(Key(suffix));
  if (!v || !std::isfinite(*v)) {
    return InvalidArgument(file_.path() + ": metadata " + Key(suffix) + " must be a number");
  }
  return static_cast<float>(*v);
}

const char* PoolingTypeName(PoolingType p) {
  switch (p) {
    case PoolingType::kMean: return "mean";
    case PoolingType::kCls: return "cls";
    case PoolingType::kLast: return "last";
    case PoolingType::kRank: return "rank";
    default: return "none";
  }
}

Result<ModelConfig> ReadBaseConfig(const gguf::GgufFile& file, const std::string& arch) {
  ArchKeys keys(file, arch);
  ModelConfig c;
  c.arch = arch;
  c.name = file.GetString("general.name").value_or(file.path());
  ASSIGN_OR_RETURN(c.n_embd, keys.RequireInt("embedding_length", kMaxDim));
  ASSIGN_OR_RETURN(c.n_layers, keys.RequireInt("block_count", kMaxLayers));
  ASSIGN_OR_RETURN(c.n_heads, keys.RequireInt("attention.head_count", kMaxHeads));
  ASSIGN_OR_RETURN(c.n_kv_heads, keys.OptionalInt("attention.head_count_kv", c.n_heads, kMaxHeads));
  ASSIGN_OR_RETURN(c.n_ctx_train, keys.OptionalInt("context_length", 2048, int64_t{1} << 32));
  ASSIGN_OR_RETURN(c.n_ff, keys.OptionalInt("feed_forward_length", 0, kMaxDim));
  if (c.n_kv_heads == 0 || c.n_heads % c.n_kv_heads != 0) {
    return InvalidArgument(file.path() + ": " + keys.Key("attention.head_count") + " (" +
                           std::to_string(c.n_heads) + ") must be a multiple of " +
                           keys.Key("attention.head_count_kv") + " (" +
                           std::to_string(c.n_kv_heads) + ")");
  }
  const int64_t default_head_dim = c.n_embd / c.n_heads;
  ASSIGN_OR_RETURN(c.head_dim, keys.OptionalInt("attention.key_length", default_head_dim, kMaxDim));
  ASSIGN_OR_RETURN(int64_t value_dim,
                   keys.OptionalInt("attention.value_length", c.head_dim, kMaxDim));
  if (c.head_dim <= 0 || value_dim != c.head_dim) {
    return Unimplemented(file.path() + ": head_dim " + std::to_string(c.head_dim) +
                         " with value_length " + std::to_string(value_dim) +
                         " is not supported (need equal, positive key and value lengths)");
  }
  ASSIGN_OR_RETURN(float eps, keys.OptionalFloat("attention.layer_norm_rms_epsilon", 1e-5f));
  if (!(eps > 0)) return InvalidArgument(file.path() + ": rms epsilon must be positive");
  c.rms_eps = eps;
  ASSIGN_OR_RETURN(c.rot_dim, keys.OptionalInt("rope.dimension_count", c.head_dim, c.head_dim));
  if (c.rot_dim % 2 != 0) {
    return InvalidArgument(file.path() + ": " + keys.Key("rope.dimension_count") +
                           " must be even");
  }
  ASSIGN_OR_RETURN(c.rope_theta, keys.OptionalFloat("rope.freq_base", 10000.0f));
  if (!(c.rope_theta > 0)) return InvalidArgument(file.path() + ": rope.freq_base must be > 0");
  ASSIGN_OR_RETURN(c.sliding_window, keys.OptionalInt("attention.sliding_window", 0, kMaxDim * 64));
  ASSIGN_OR_RETURN(int64_t pooling, keys.OptionalInt("pooling_type", 0, 4));
  c.pooling = static_cast<PoolingType>(pooling);
  if (keys.Has("pooling.normalize")) {
    std::optional<bool> v = file.GetBool(keys.Key("pooling.normalize"));
    if (!v) return InvalidArgument(file.path() + ": " + keys.Key("pooling.normalize") +
                                   " must be a boolean");
    c.normalize_embeddings = *v;
  }
  ASSIGN_OR_RETURN(c.max_pool_tokens, keys.OptionalInt("pooling.max_length", 0, c.n_ctx_train));
  if (c.max_pool_tokens == 0) c.max_pool_tokens = c.n_ctx_train;
  return c;
}

std::vector<float> PlainRopeFrequencies(double theta, int64_t rot_dim) {
  std::vector<float> f(static_cast<size_t>(rot_dim / 2));
  for (int64_t i = 0; i < rot_dim / 2; ++i) {
    f[i] = static_cast<float>(
        std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rot_dim)));
  }
  return f;
}

Status ComputeRopeFrequencies(const ArchKeys& keys, const float* freq_factors,
                              ModelConfig* config) {
  const gguf::GgufFile& file = keys.file();
  const int64_t n_pairs = config->rot_dim / 2;
  std::string type = file.GetString(keys.Key("rope.scaling.type")).value_or("none");
  ASSIGN_OR_RETURN(float factor, keys.OptionalFloat("rope.scaling.factor", 1.0f));
  if (keys.Has("rope.scale_linear")) {  // older key for linear scaling
    ASSIGN_OR_RETURN(factor, keys.OptionalFloat("rope.scale_linear", 1.0f));
    type = "linear";
  }
  if (!(factor > 0)) return InvalidArgument(file.path() + ": rope scaling factor must be > 0");
  if (type != "none" && type != "linear" && type != "llama3") {
    return Unimplemented(file.path() + ": " + keys.Key("rope.scaling.type") + " '" + type +
                         "' is not supported (supported: none, linear, llama3)");
  }
  ASSIGN_OR_RETURN(int64_t orig_ctx,
                   keys.OptionalInt("rope.scaling.original_context_length", 8192, 1 << 30));
  ASSIGN_OR_RETURN(float low_ff, keys.OptionalFloat("rope.scaling.low_freq_factor", 1.0f));
  ASSIGN_OR_RETURN(float high_ff, keys.OptionalFloat("rope.scaling.high_freq_factor", 4.0f));

  config->rope_inv_freq.resize(n_pairs);
  for (int64_t i = 0; i < n_pairs; ++i) {
    double freq = std::pow(static_cast<double>(config->rope_theta),
                           -2.0 * static_cast<double>(i) / static_cast<double>(config->rot_dim));
    if (freq_factors != nullptr) {
      // Llama 3.x: the converter stored per-pair divisors; no further scaling applies.
      freq /= freq_factors[i];
    } else if (type == "linear") {
      freq /= factor;
    } else if (type == "llama3" && factor != 1.0f && orig_ctx > 0 && high_ff > low_ff) {
      const double wavelen = 2 * std::numbers::pi / freq;
      const double low_wavelen = orig_ctx / low_ff, high_wavelen = orig_ctx / high_ff;
      if (wavelen > low_wavelen) {
        freq /= factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (orig_ctx / wavelen - low_ff) / (high_ff - low_ff);
        freq = (1 - smooth) * freq / factor + smooth * freq;
      }
    }
    config->rope_inv_freq[i] = static_cast<float>(freq);
  }
  return OkStatus();
}

}  // namespace tachyon::model
