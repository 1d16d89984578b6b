// Loading a Hugging Face model folder as a Model.
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

}  // namespace tachyon::model
