// Loading a Hugging Face model folder as a Model, and quantize-on-load.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"
#include "util/status.h"

namespace tachyon::model {

// Converts `dir` (see model/hf_convert.h) into a GGUF file in $TMPDIR (else /tmp), loads it
// and removes the file name (the mapping stays valid), so the disk space is returned when the
// model is destroyed. The model's general.name is the folder name.
Result<std::unique_ptr<Model>> LoadHfModel(const std::string& dir);

// Quantize on load (LoadOptions::quantize): quantizes the float matrices of `path` (a GGUF file
// or an HF folder) exactly as `tachyon quantize` would (model/hf_quantize.h), on a thread pool,
// into a GGUF in $TMPDIR that is mapped and unlinked like LoadHfModel's. Errors: an unknown
// quantization name (InvalidArgument listing the choices), and those of loading `path`.
Result<std::unique_ptr<Model>> LoadQuantized(const std::string& path, const LoadOptions& options);

}  // namespace tachyon::model
