#!/usr/bin/env bash
# Installs every dependency tachyon needs to build, test and benchmark on Debian 12.
# Idempotent and fast when nothing changed: apt runs only if a package is missing, pip only
# if requirements.txt changed. Works as root or through sudo.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git   # toolchain
  ccache                                             # compiler cache (faster rebuilds)
  clang libclang-rt-14-dev                           # libFuzzer targets (fuzz/)
  libgtest-dev libgmock-dev                          # unit tests
  libbenchmark-dev                                   # kernel microbenchmarks (bench/)
  nlohmann-json3-dev                                 # JSON: tokenizer.json, API bodies, --json output
  libcli11-dev                                       # command-line flags of every subcommand
  libpcre2-dev                                       # Unicode regex pre-tokenization
  libutf8proc-dev                                    # Unicode NFC/NFKC normalization (tokenizers)
  libboost-dev                                       # Boost.Asio/Beast async HTTP server
  libxxhash-dev                                      # prefix-cache block hashing
  libcurl4-openssl-dev                               # model downloads (tachyon pull)
  python3 python3-venv python3-pip                   # test tools (pytest, openai client)
  curl gnuplot-nox                                   # README example, benchmark charts
  chromium chromium-driver                           # headless browser test of the chat page
  iproute2 iptables                                  # network namespace fault tests (router)
  etcd-server                                        # router discovery tests (tachyon route --etcd)
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python test tools live in a project-local virtualenv.
venv="$root/.venv"
req="$root/scripts/requirements.txt"
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing python test tools"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
  echo "$want" > "$stamp"
fi

# The default chat model (SmolLM2-135M-Instruct) for scripts/run.sh and the tests that need real
# weights; offline, this says so and goes on.
"$root/scripts/fetch_model.sh"
"$root/scripts/fetch_model.sh" --minilm
"$root/scripts/fetch_model.sh" --gemma
