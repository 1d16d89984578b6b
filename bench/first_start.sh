#!/usr/bin/env bash
# A newcomer's first start, measured: a fresh clone of this repository, an empty compiler cache
# (CCACHE_DIR) and empty download caches (XDG_CACHE_HOME: pip's cache, the model cache), then
#   ready   seconds until `scripts/run.sh` prints "ready at" (setup + build + model load)
#   curl    seconds until the README's curl example has its answer
#   openai  seconds until the README's openai example has printed its streamed answer
# The two examples are taken from README.md as written (its ```sh blocks) and run in the clone.
# Apt packages are not removed first: apt runs only if one is missing (scripts/setup.sh), so the
# figure includes apt only then. Needs the network (pip, the model) and port 8080 free.
# Usage: bench/first_start.sh [REPO]   (default: this checkout's committed HEAD)
set -euo pipefail
src=$(cd "${1:-$(dirname "$0")/..}" && pwd)
work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
if (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; then
  echo "first_start: port 8080 is in use; the README's examples need it" >&2
  exit 2
fi
git clone -q "$src" "$work/tachyon"
cd "$work/tachyon"
# The README's shell blocks, in order: [0] run/test, [1] curl, [2] openai.
block() { awk -v want="$1" '/^```sh$/ {n++; on=(n==want+1); next} /^```$/ {on=0} on' README.md; }
curl_cmd=$(block 1)
openai_cmd=$(block 2)
grep -q "curl" <<<"$curl_cmd" || { echo "first_start: README block 1 is not the curl example" >&2; exit 2; }
grep -q "openai" <<<"$openai_cmd" || { echo "first_start: README block 2 is not the openai example" >&2; exit 2; }
export CCACHE_DIR="$work/ccache" XDG_CACHE_HOME="$work/cache"
now() { date +%s.%N; }
t0=$(now)
scripts/run.sh >"$work/run.log" 2>&1 &
server=$!
until grep -q "ready at" "$work/run.log"; do
  if ! kill -0 "$server" 2>/dev/null; then
    cat "$work/run.log" >&2
    echo "first_start: scripts/run.sh exited before it was ready" >&2
    exit 1
  fi
  sleep 0.2
done
t_ready=$(now)
curl_out=$(bash -c "$curl_cmd")
t_curl=$(now)
openai_out=$(bash -c "$openai_cmd")
t_openai=$(now)
kill "$server"
wait "$server" || true
server=""
echo "curl answer:   $curl_out"
echo "openai answer: $openai_out"
grep -q '"finish_reason"' <<<"$curl_out" || { echo "first_start: no completion from curl" >&2; exit 1; }
[ -n "$openai_out" ] || { echo "first_start: no text from the openai example" >&2; exit 1; }
awk -v a="$t0" -v b="$t_ready" -v c="$t_curl" -v d="$t_openai" 'BEGIN {
  printf "first_start: ready %.1f s, curl answered at %.1f s, openai answered at %.1f s\n",
         b - a, c - a, d - a }'
grep "^setup:\|^fetch_model:" "$work/run.log" || true
echo "first_start: CPU seconds (user, system) of this script, then of everything it ran:"
times
echo "first_start: $(nproc) cores; load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
