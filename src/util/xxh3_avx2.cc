// XXH3-64 built for AVX2 (util/xxh3.h).
#define TACHYON_XXH3_NS xxh3_avx2
#include "util/xxh3_impl.inc"
