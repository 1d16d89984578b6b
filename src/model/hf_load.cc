#include "model/hf_load.h"

#include <stdlib.h>

#include <filesystem>

#include "model/hf_convert.h"
#include "model/hf_quantize.h"
#include "util/thread_pool.h"

namespace tachyon::model {

namespace {

// A fresh folder under $TMPDIR (else /tmp), removed when this goes out of scope. Files
// mapped from it stay readable after removal; their space returns when they are unmapped.
class TempFolder {
 public:
  static Result<TempFolder> Create(const std::string& what) {
    const char* tmp_root = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(tmp_root && *tmp_root ? tmp_root : "/tmp") + "/tachyon-hf-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      return Unavailable(what + ": cannot create a temporary folder under " + tmpl);
    }
    return TempFolder(tmpl);
  }
  TempFolder(TempFolder&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  ~TempFolder() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit TempFolder(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<Model>> LoadHfModel(const std::string& dir) {
  ASSIGN_OR_RETURN(std::unique_ptr<HfGguf> conv, HfGguf::Convert(dir));
  ASSIGN_OR_RETURN(TempFolder tmp, TempFolder::Create(dir));
  const std::string gguf_path = tmp.path() + "/model.gguf";
  Status st = conv->writer().WriteFile(gguf_path);
  conv.reset();  // release the safetensors mappings and converted buffers
  Result<std::unique_ptr<Model>> model =
      st.ok() ? Model::Load(gguf_path) : Result<std::unique_ptr<Model>>(st);
  if (!model.ok()) return model.status().WithContext(dir);
  return model;
}

Result<std::unique_ptr<Model>> LoadQuantized(const std::string& path, const LoadOptions& options) {
  std::optional<QuantPreset> preset = FindLoadQuantization(options.quantize);
  if (!preset) {
    return InvalidArgument("unknown quantization '" + options.quantize +
                           "' (supported: " + kLoadQuantizationNames + ")");
  }
  ASSIGN_OR_RETURN(TempFolder tmp, TempFolder::Create(path));
  const std::string out = tmp.path() + "/model.gguf";
  {
    ThreadPool pool(options.threads > 0 ? options.threads : HardwareThreads());
    ASSIGN_OR_RETURN(QuantizeStats stats,
                     QuantizeModelFile(path, out, *preset, &pool, /*float_only=*/true));
    (void)stats;
  }
  Result<std::unique_ptr<Model>> model = Model::Load(out);
  if (!model.ok()) return model.status().WithContext(path);
  return model;
}

}  // namespace tachyon::model
