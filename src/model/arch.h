// Architectures: each supported general.architecture is one ArchDef in its own file
// (llama.cc, qwen2.cc, qwen3.cc, qwen3moe.cc, gemma3.cc), composed from the shared layer loaders of
// model/layers.h and listed in the table of arch.cc. Adding an architecture = one new file
// plus one table entry; nothing else switches on the architecture name.
#pragma once

#include <string>
#include <string_view>

#include "model/config.h"
#include "model/weights.h"
#include "util/status.h"

namespace tachyon::model {

struct ArchDef {
  const char* name;  // general.architecture
  // Sets the architecture's feature flags and reads its own keys (after ReadBaseConfig).
  Status (*configure)(const ArchKeys& keys, ModelConfig* config);
  // Loads the tensors of layer `il`.
  Status (*load_layer)(TensorSource& src, const ModelConfig& config, int64_t il,
                       LayerWeights* layer);
  // Loads the tensors outside the layers (embeddings, output); null: the decoder default
  // (token_embd, output_norm, output or tied, rope_freqs).
  Status (*load_globals)(TensorSource& src, ModelConfig* config, ModelWeights* weights) = nullptr;
  // The chat template (Jinja) to use when the file carries no tokenizer.chat_template; null
  // when the architecture has no single format.
  const char* chat_template = nullptr;
};

// The definition for `name`, or null if unsupported.
const ArchDef* FindArch(std::string_view name);
// "llama, qwen2, ..." for error messages.
std::string SupportedArchNames();

extern const ArchDef kLlamaArch;
extern const ArchDef kQwen2Arch;
extern const ArchDef kQwen3Arch;
extern const ArchDef kQwen3MoeArch;
extern const ArchDef kBertArch;
extern const ArchDef kGemma3Arch;

}  // namespace tachyon::model
