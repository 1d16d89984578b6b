#include "util/xxh3.h"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "util/cpu_features.h"

namespace tachyon {

#define TACHYON_XXH3_DECLARE(ns)                                \
  namespace ns {                                                \
  uint64_t Hash(const void* data, size_t size);                 \
  void Reset(void* state);                                      \
  void Update(void* state, const void* data, size_t size);      \
  uint64_t Digest(const void* state);                           \
  }
TACHYON_XXH3_DECLARE(xxh3_avx2)
TACHYON_XXH3_DECLARE(xxh3_avx512)
#undef TACHYON_XXH3_DECLARE

namespace {

static_assert(sizeof(XXH3_state_t) <= 576 && alignof(XXH3_state_t) <= 64,
              "Xxh3Stream::state_ must hold an XXH3_state_t");

struct Impl {
  uint64_t (*hash)(const void*, size_t);
  void (*reset)(void*);
  void (*update)(void*, const void*, size_t);
  uint64_t (*digest)(const void*);
};

// The library's own build (plain x86-64).
constexpr Impl kPlain = {
    [](const void* d, size_t n) -> uint64_t { return XXH3_64bits(d, n); },
    [](void* s) {
      auto* st = static_cast<XXH3_state_t*>(s);
      XXH3_INITSTATE(st);
      XXH3_64bits_reset(st);
    },
    [](void* s, const void* d, size_t n) {
      XXH3_64bits_update(static_cast<XXH3_state_t*>(s), d, n);
    },
    [](const void* s) -> uint64_t {
      return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(s));
    }};
constexpr Impl kAvx2 = {xxh3_avx2::Hash, xxh3_avx2::Reset, xxh3_avx2::Update, xxh3_avx2::Digest};
constexpr Impl kAvx512 = {xxh3_avx512::Hash, xxh3_avx512::Reset, xxh3_avx512::Update,
                          xxh3_avx512::Digest};

// The build of `level` if this CPU runs it (the detected features, not TACHYON_CPU's cap).
const Impl* ImplFor(int level) {
  const CpuFeatures& f = DetectedCpuFeatures();
  if (level == 0) return &kPlain;
  if (level == 1 && f.HasAvx2Set()) return &kAvx2;
  if (level == 2 && f.HasAvx512Set()) return &kAvx512;
  return nullptr;
}

const Impl& Best() {
  static const Impl* impl = [] {
    switch (BestSimdLevel()) {
      case SimdLevel::kAmx:
      case SimdLevel::kAvx512:
        return &kAvx512;
      case SimdLevel::kAvx2:
        return &kAvx2;
      case SimdLevel::kScalar:
        break;
    }
    return &kPlain;
  }();
  return *impl;
}

}  // namespace

uint64_t Xxh3(const void* data, size_t size) {
  return Best().hash(data, size);
}

Xxh3Stream::Xxh3Stream() {
  Best().reset(state_);
}

void Xxh3Stream::Update(const void* data, size_t size) {
  Best().update(state_, data, size);
}

uint64_t Xxh3Stream::Digest() const {
  return Best().digest(state_);
}

bool Xxh3With(int level, const void* data, size_t size, uint64_t* out) {
  const Impl* impl = ImplFor(level);
  if (impl == nullptr) return false;
  *out = impl->hash(data, size);
  return true;
}

}  // namespace tachyon
