#!/usr/bin/env bash
# Serving benchmark: starts `tachyon serve` on a model, waits until it is ready, runs the
# bench/serve_load.py sweep (workloads x concurrency levels), writes JSON + PNG, stops the server.
#
#   bench/serve_bench.sh MODEL.gguf [OUT_PREFIX] [-- serve_load.py options]
#
# Environment: TACHYON (binary, default build/tachyon), THREADS (compute threads, default 2),
# PORT (default 0 = a free port), SERVE_ARGS (extra `tachyon serve` options),
# CONCURRENCY (default 1,8,32), WORKLOADS (default A,B), ROUNDS (requests per client, default 2),
# MIN_REQUESTS (at least this many per point, default 8),
# PYTHON (default .venv/bin/python, else python3).
# Writes OUT_PREFIX.json, OUT_PREFIX.png and OUT_PREFIX.log (server log); OUT_PREFIX defaults
# to ./serve_bench.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,/^set /p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
  exit 2
fi
model=$1; shift
out=serve_bench
if [ $# -gt 0 ] && [ "$1" != "--" ]; then out=$1; shift; fi
[ "${1:-}" = "--" ] && shift
tachyon=${TACHYON:-$root/build/tachyon}
python=${PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || python=python3
[ -f "$model" ] || { echo "serve_bench: model not found: $model" >&2; exit 1; }
[ -x "$tachyon" ] || { echo "serve_bench: binary not found: $tachyon (build first)" >&2; exit 1; }

log=$out.log
ready=$(mktemp)
# shellcheck disable=SC2086
"$tachyon" serve -m "$model" --host 127.0.0.1 --port "${PORT:-0}" --threads "${THREADS:-2}" \
  --max-num-seqs 64 ${SERVE_ARGS:-} >"$ready" 2>"$log" &
pid=$!
cleanup() {
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -f "$ready"
}
trap cleanup EXIT
# The ready line carries the URL (and the port picked with --port 0).
line=
for _ in $(seq 3000); do
  line=$(grep -m1 "ready at http://" "$ready" || true)
  [ -n "$line" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then break; fi
  sleep 0.2
done
if [ -z "$line" ]; then
  echo "serve_bench: the server did not become ready; its log:" >&2
  cat "$log" >&2
  exit 1
fi
url=${line#*ready at }
url=${url%%/v1*}
echo "serve_bench: $line" >&2
"$python" "$root/bench/serve_load.py" --url "$url" --workload "${WORKLOADS:-A,B}" \
  --concurrency "${CONCURRENCY:-1,8,32}" --rounds "${ROUNDS:-2}" \
  --min-requests "${MIN_REQUESTS:-8}" \
  --json "$out.json" --png "$out.png" --title "tachyon serve: $(basename "$model")" "$@"
