// How a user names a model (`-m SPEC` of every command, `tachyon pull SPEC`):
//
//   ./model.gguf, /abs/model.gguf     a local GGUF file
//   ./Qwen2.5-0.5B-Instruct/          a local Hugging Face folder (config.json + safetensors)
//   hf://ORG/NAME[@REV][/FILE]        a Hugging Face Hub repository (FILE: one file in it)
//   ORG/NAME[@REV][:FILE]             the same, when no local file or folder has that name
//
// A path that exists on disk always wins; so do names that look like paths (starting with
// '/', '.', '~', ending in '/', or ending in .gguf without a ':FILE'). REV defaults to "main".
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace tachyon::hub {

struct ModelSpec {
  enum class Kind { kLocal, kHub };
  Kind kind = Kind::kLocal;
  std::string path;               // kLocal: the file or folder
  std::string repo;               // kHub: "ORG/NAME"
  std::string revision = "main";  // kHub: branch, tag or commit
  std::string file;               // kHub: a file in the repo; "" = the whole model

  bool is_hub() const { return kind == Kind::kHub; }
  // "ORG/NAME[@REV][:FILE]" or the path, for messages.
  std::string ToString() const;
};

// True for a valid Hub repo id "ORG/NAME" (letters, digits, '-', '_', '.'; no "..", no
// leading or trailing '-' / '.').
bool IsValidRepoId(std::string_view repo);

// Parses `spec` as above. Errors (InvalidArgument): empty spec, hf:// with a malformed repo
// id, a FILE with ".." components.
Result<ModelSpec> ParseModelSpec(std::string_view spec);

}  // namespace tachyon::hub
