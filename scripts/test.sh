#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite:
#   1. every unit and CLI test (ctest) under AddressSanitizer + UndefinedBehaviorSanitizer
#      (build-asan/: clang, a unity build; it also holds the libFuzzer targets),
#   2. the release build's binary and the programs the Python tests drive (build/, a unity
#      build when build/ is configured here), and the
#      speculative-decoding statistical tests at full size on it (10^6 draws per case; the
#      sanitizer build runs them on fewer),
#   3. every libFuzzer target of build-asan/ for FUZZ_SECONDS each (default 20, as many at a time
#      as there are cores; scripts/fuzz.sh); FUZZ_SECONDS=0 skips them,
#   4. the Python end-to-end tests (pytest) against the release binary, if any (the 15 slowest
#      listed),
#   5. schemathesis: the HTTP API against docs/openapi.yaml (scripts/schemathesis.sh).
# The release build's unit-test programs are not built here (`scripts/build.sh release` builds
# them; `ctest --test-dir build` runs them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$SECONDS
phase() { echo "== [$((SECONDS - start)) s] $*"; }  # each step's start, in seconds from ours
phase "setup"
scripts/setup.sh
phase "ASan + UBSan build"
scripts/build.sh asan
phase "ctest (asan+ubsan)"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure --timeout 900 -j "$(nproc)"
phase "release build"
TACHYON_UNITY=ON scripts/build.sh release tachyon grammar_schema_tool spec_test
phase "speculative decoding statistical tests (release, full size)"
build/spec_test --gtest_brief=1
if [ "${FUZZ_SECONDS:-20}" != 0 ]; then
  phase "fuzz (${FUZZ_SECONDS:-20} s per target)"
  scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
fi
if compgen -G "tests/python/test_*.py" >/dev/null; then
  phase "pytest"
  TACHYON_BINARY="$root/build/tachyon" .venv/bin/python -m pytest -q --durations=15 tests/python
fi
phase "schemathesis (docs/openapi.yaml against a live server, ~100 s)"
TACHYON_BINARY="$root/build/tachyon" scripts/schemathesis.sh
phase "done"
