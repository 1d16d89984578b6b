// XXH3-64 built for AVX-512 (util/xxh3.h).
#define TACHYON_XXH3_NS xxh3_avx512
#include "util/xxh3_impl.inc"
