#include "model/arch.h"

namespace tachyon::model {

namespace {
const ArchDef* const kArchs[] = {&kLlamaArch,    &kQwen2Arch, &kQwen3Arch,
                                 &kQwen3MoeArch, &kBertArch,  &kGemma3Arch};
}  // namespace

const ArchDef* FindArch(std::string_view name) {
  for (const ArchDef* a : kArchs) {
    if (name == a->name) return a;
  }
  return nullptr;
}

std::string SupportedArchNames() {
  std::string s;
  for (const ArchDef* a : kArchs) {
    if (!s.empty()) s += ", ";
    s += a->name;
  }
  return s;
}

}  // namespace tachyon::model
