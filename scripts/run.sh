#!/usr/bin/env bash
# Installs dependencies, builds the tachyon binary (only it: no test programs) and serves a model
# over the OpenAI-compatible API.
# Usage: scripts/run.sh [MODEL] [tachyon serve options]   (a first argument starting with '-' is
# an option: `scripts/run.sh --port 9000` serves the default model on port 9000)
# With no MODEL, serves SmolLM2-135M-Instruct (a small chat model with a ChatML template, fetched
# into the cache by scripts/setup.sh); when it could not be fetched (offline), stories260K from
# ../shared/testdata, which has no chat template (only /v1/completions then).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
scripts/build.sh release tachyon >/dev/null
model=""
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  model=$1
  shift
fi
if [ -z "$model" ]; then
  model=$(scripts/fetch_model.sh --print-path)
  if [ ! -f "$model" ]; then
    echo "run: SmolLM2-135M-Instruct is not in the cache (setup could not fetch it; offline?)." >&2
    model="${TACHYON_TESTDATA:-$root/../shared/testdata}/stories260K/stories260K.gguf"
    if [ ! -f "$model" ]; then
      echo "run: the offline fallback $model is missing too." >&2
      echo "run: pass a model: scripts/run.sh /path/to/model.gguf (or a Hugging Face folder)" >&2
      exit 2
    fi
    echo "run: serving stories260K instead; it has no chat template, so use /v1/completions" >&2
    echo "run: (or pass --chat-template FILE); scripts/setup.sh fetches SmolLM2 when online." >&2
  fi
fi
exec build/tachyon serve -m "$model" "$@"
