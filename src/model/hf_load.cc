#include "model/hf_load.h"

#include <stdlib.h>

#include <filesystem>

#include "model/hf_convert.h"

namespace tachyon::model {

Result<std::unique_ptr<Model>> LoadHfModel(const std::string& dir) {
  ASSIGN_OR_RETURN(std::unique_ptr<HfGguf> conv, HfGguf::Convert(dir));
  const char* tmp_root = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp_root && *tmp_root ? tmp_root : "/tmp") + "/tachyon-hf-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    return Unavailable(dir + ": cannot create a temporary folder under " + tmpl);
  }
  const std::string gguf_path = tmpl + "/model.gguf";
  Status st = conv->writer().WriteFile(gguf_path);
  conv.reset();  // release the safetensors mappings and converted buffers
  Result<std::unique_ptr<Model>> model =
      st.ok() ? Model::Load(gguf_path) : Result<std::unique_ptr<Model>>(st);
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  if (!model.ok()) return model.status().WithContext(dir);
  return model;
}

}  // namespace tachyon::model
