#!/usr/bin/env bash
# Builds tachyon. Usage: scripts/build.sh [release|asan] [TARGET...]  (default release, all
# targets; e.g. `scripts/build.sh release tachyon` builds only the binary, no test programs)
#   release -> build/        optimized, portable x86-64 binary with run-time SIMD dispatch
#                            (TACHYON_UNITY=ON: a unity build, as scripts/test.sh makes it)
#   asan    -> build-asan/   clang, AddressSanitizer + UndefinedBehaviorSanitizer + libFuzzer
#                            coverage: the unit tests and the fuzz targets (fuzz/, run by
#                            scripts/fuzz.sh); a unity build (8 files of a library or test program
#                            per translation unit)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-release}
targets=("${@:2}")
jobs=$(nproc)
case "$kind" in
  release) dir=build;      args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=${TACHYON_UNITY:-OFF}) ;;
  asan)    dir=build-asan; args=(-DCMAKE_BUILD_TYPE=None -DTACHYON_SANITIZE=ON -DTACHYON_FUZZ=ON -DTACHYON_BENCH=OFF
                                 -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang "-DCMAKE_CXX_FLAGS=-O1 -g1"
                                 -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8) ;;
  *) echo "usage: $0 [release|asan]" >&2; exit 2 ;;
esac
# ccache (installed by setup.sh) makes rebuilds and extra worktrees cheap; paths under the
# repository's parent are hashed relative, so clones side by side share one cache, except in
# the unity builds (asan, and release with TACHYON_UNITY=ON), whose generated sources include
# every file by its absolute path: there only the same folder hits again. Direct mode
# is off: every lookup hashes the preprocessed source, so a header that differs between two
# clones can never bring back the other clone's object.
if command -v ccache >/dev/null; then
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$root")} CCACHE_NOHASHDIR=1 CCACHE_NODIRECT=1
fi
# A folder configured with other options (an older compiler choice, say) is configured anew.
stamp="$root/$dir/.tachyon-configure-args"
if [ -f "$root/$dir/build.ninja" ] && [ "$(cat "$stamp" 2>/dev/null)" != "${args[*]}" ]; then
  rm -rf "${root:?}/$dir"
fi
if [ ! -f "$root/$dir/build.ninja" ]; then
  cmake -S "$root" -B "$root/$dir" -G Ninja "${args[@]}" >/dev/null
  echo "${args[*]}" >"$stamp"
fi
cmake --build "$root/$dir" -j "$jobs" ${targets[@]:+--target "${targets[@]}"}
