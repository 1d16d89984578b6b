// ResolveModel: turns what the user typed after -m (see hub/model_spec.h) into files on disk,
// downloading from the Hub when needed. Every command that takes -m calls it:
//
//   ASSIGN_OR_RETURN(hub::ResolvedModel rm, hub::ResolveModel(spec));
//   ASSIGN_OR_RETURN(auto model, model::Model::Load(rm.model_path));
//   ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::FromGguf(model->file()));
//   // chat template: tok->chat_template(); eos: tok->EogIds() + rm.generation.eos_token_ids
//
// (A Hugging Face folder loads as a GGUF that carries its tokenizer.json, chat template and
// BOS/EOS, so Tokenizer::FromGguf(model->file()) works for both kinds.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hub/client.h"
#include "hub/model_spec.h"
#include "util/status.h"

namespace tachyon::hub {

// generation_config.json of a Hugging Face folder: the publisher's sampling defaults.
struct GenerationDefaults {
  std::vector<int32_t> eos_token_ids;  // eos_token_id (a number or a list)
  std::optional<int32_t> bos_token_id;
  std::optional<bool> do_sample;  // false: greedy
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<int32_t> max_new_tokens;
};

// Reads `path` (generation_config.json). A missing file gives empty defaults; malformed JSON
// or a field of the wrong type is an error naming the file and field.
Result<GenerationDefaults> ReadGenerationConfig(const std::string& path);

struct ResolvedModel {
  ModelSpec spec;
  std::string model_path;  // GGUF file or HF folder: pass to model::Model::Load
  bool is_hf_folder = false;
  // Folder with tokenizer.json (+ tokenizer_config.json) for an HF folder; the GGUF file
  // itself otherwise (tokenizer::Tokenizer::FromFile accepts both).
  std::string tokenizer_path;
  // A name for the model: the Hub repo id ("Qwen/Qwen2.5-0.5B-Instruct"), else the file's stem
  // or the folder's name.
  std::string name;
  GenerationDefaults generation;  // empty for GGUF files
  bool downloaded = false;        // files were fetched from the Hub by this call
};

struct ResolveOptions {
  HubOptions hub = HubOptionsFromEnv();
  // false: never download (a Hub name must already be in the cache).
  bool allow_download = true;
};

// Local file or folder: checked to exist (NotFound otherwise, with how to name a model).
// Hub names: the cache, downloading what is missing (see hub/pull.h).
Result<ResolvedModel> ResolveModel(const std::string& spec,
                                   const ResolveOptions& options = ResolveOptions());

}  // namespace tachyon::hub
