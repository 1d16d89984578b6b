#!/usr/bin/env bash
# Builds tachyon. Usage: scripts/build.sh [release|asan|fuzz] [TARGET...]  (default release, all
# targets; e.g. `scripts/build.sh release tachyon` builds only the binary, no test programs)
#   release -> build/        optimized, portable x86-64 binary with run-time SIMD dispatch
#                            (TACHYON_UNITY=ON: a unity build, as scripts/test.sh makes it)
#   asan    -> build-asan/   AddressSanitizer + UndefinedBehaviorSanitizer, unit tests; a unity
#                            build (8 files of a library or test program per translation unit)
#   fuzz    -> build-fuzz/   clang libFuzzer targets (a unity build too)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-release}
targets=("${@:2}")
jobs=$(nproc)
case "$kind" in
  release) dir=build;      args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=${TACHYON_UNITY:-OFF}) ;;
  asan)    dir=build-asan; args=(-DCMAKE_BUILD_TYPE=None -DTACHYON_SANITIZE=ON -DTACHYON_BENCH=OFF "-DCMAKE_CXX_FLAGS=-O1 -g1"
                                 -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8) ;;
  fuzz)    dir=build-fuzz; args=(-DCMAKE_BUILD_TYPE=Debug -DTACHYON_FUZZ=ON -DTACHYON_TESTS=OFF -DTACHYON_BENCH=OFF
                                 -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_FLAGS=-O1
                                 -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8) ;;
  *) echo "usage: $0 [release|asan|fuzz]" >&2; exit 2 ;;
esac
# ccache (installed by setup.sh) makes rebuilds and extra worktrees cheap; paths under the
# repository's parent are hashed relative, so clones side by side share one cache. Direct mode
# is off: every lookup hashes the preprocessed source, so a header that differs between two
# clones can never bring back the other clone's object.
if command -v ccache >/dev/null; then
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$root")} CCACHE_NOHASHDIR=1 CCACHE_NODIRECT=1
fi
if [ ! -f "$root/$dir/build.ninja" ]; then
  cmake -S "$root" -B "$root/$dir" -G Ninja "${args[@]}" >/dev/null
fi
cmake --build "$root/$dir" -j "$jobs" ${targets[@]:+--target "${targets[@]}"}
