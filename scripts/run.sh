#!/usr/bin/env bash
# Installs dependencies, builds, and starts tachyon's main job on a model.
# Usage: scripts/run.sh [MODEL] [extra options]
# With no MODEL, uses the stories260K model from ../shared/testdata.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
scripts/build.sh release >/dev/null
model=${1:-}
if [ -n "$model" ]; then shift; fi
if [ -z "$model" ]; then
  model="${TACHYON_TESTDATA:-$root/../shared/testdata}/stories260K/stories260K.gguf"
  if [ ! -f "$model" ]; then
    echo "run: no model given and the default $model is missing." >&2
    echo "run: pass one: scripts/run.sh /path/to/model.gguf" >&2
    exit 2
  fi
fi
if build/tachyon serve --help >/dev/null 2>&1; then
  exec build/tachyon serve -m "$model" "$@"
elif build/tachyon run --help >/dev/null 2>&1; then
  exec build/tachyon run -m "$model" -p "Once upon a time" "$@"
else
  exec build/tachyon inspect "$model" "$@"
fi
