#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite:
#   1. unit + CLI tests (ctest) on the release build,
#   2. the same tests under AddressSanitizer + UndefinedBehaviorSanitizer,
#   3. every libFuzzer target for FUZZ_SECONDS each (default 20; scripts/fuzz.sh builds only the
#      fuzz targets and their libraries, in build-fuzz/); FUZZ_SECONDS=0 skips them,
#   4. the Python end-to-end tests (pytest) against the release binary, if any,
#   5. schemathesis: the HTTP API against docs/openapi.yaml (scripts/schemathesis.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
scripts/build.sh release
scripts/build.sh asan
echo "== ctest (release)"
ctest --test-dir build --output-on-failure --timeout 600 -j "$(nproc)"
echo "== ctest (asan+ubsan)"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure --timeout 900 -j "$(nproc)"
if [ "${FUZZ_SECONDS:-20}" != 0 ]; then
  echo "== fuzz (${FUZZ_SECONDS:-20} s per target)"
  scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
fi
if compgen -G "tests/python/test_*.py" >/dev/null; then
  echo "== pytest"
  TACHYON_BINARY="$root/build/tachyon" .venv/bin/python -m pytest -q tests/python
fi
echo "== schemathesis (docs/openapi.yaml against a live server, ~100 s)"
TACHYON_BINARY="$root/build/tachyon" scripts/schemathesis.sh
