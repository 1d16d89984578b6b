#!/usr/bin/env bash
# Installs dependencies, builds, and serves a model over the OpenAI-compatible API.
# Usage: scripts/run.sh [MODEL] [tachyon serve options]
# With no MODEL, serves the stories260K model from ../shared/testdata.
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
    echo "run: pass one: scripts/run.sh /path/to/model.gguf (or a Hugging Face folder)" >&2
    exit 2
  fi
fi
exec build/tachyon serve -m "$model" "$@"
