#!/usr/bin/env bash
# TTFT under closed-loop chat bursts (bench/ttft_bench.py): starts `tachyon serve` on a model,
# runs the shared-prefix and distinct-prompt workloads, and, when PEER_SERVER names a
# llama.cpp llama-server binary, the same distinct load against it on the same model file
# (`-np CLIENTS -c CLIENTS*2048`) right after tachyon's, for the p99 ratio. Both servers are up
# during the run, one idle while the other is measured.
#
#   bench/ttft_bench.sh MODEL.gguf [-- ttft_bench.py options]
#
# Environment: TACHYON (binary, default build/tachyon), THREADS (default 2), CLIENTS (default 8),
# SERVE_ARGS (extra `tachyon serve` options), PEER_SERVER, PEER_ARGS (extra llama-server
# options), OUT (JSON prefix, default ./ttft_bench), PYTHON (default .venv/bin/python).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,/^set /p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
  exit 2
fi
model=$1; shift
[ "${1:-}" = "--" ] && shift
tachyon=${TACHYON:-$root/build/tachyon}
python=${PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || python=python3
threads=${THREADS:-2}
clients=${CLIENTS:-8}
out=${OUT:-ttft_bench}
[ -f "$model" ] || { echo "ttft_bench: model not found: $model" >&2; exit 1; }
[ -x "$tachyon" ] || { echo "ttft_bench: binary not found: $tachyon (build first)" >&2; exit 1; }

pids=()
stop() {
  for p in "${pids[@]}"; do
    if kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p" 2>/dev/null || true
      wait "$p" 2>/dev/null || true
    fi
  done
  pids=()
}
trap stop EXIT
# wait_ready URL PID: until GET URL/v1/models answers (false if the server died).
wait_ready() {
  for _ in $(seq 3000); do
    if "$python" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1] + '/v1/models', timeout=5)" "$1" 2>/dev/null; then
      return 0
    fi
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
free_port() { "$python" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }

port=$(free_port)
# shellcheck disable=SC2086
"$tachyon" serve -m "$model" --host 127.0.0.1 --port "$port" --threads "$threads" \
  --max-num-seqs 64 ${SERVE_ARGS:-} >"$out.tachyon.log" 2>&1 &
pids+=($!)
wait_ready "http://127.0.0.1:$port" "${pids[0]}" ||
  { echo "ttft_bench: tachyon did not start:" >&2; cat "$out.tachyon.log" >&2; exit 1; }
peer=()
if [ -n "${PEER_SERVER:-}" ]; then
  peer_port=$(free_port)
  # shellcheck disable=SC2086
  "$PEER_SERVER" -m "$model" --host 127.0.0.1 --port "$peer_port" -t "$threads" -np "$clients" \
    -c $((clients * 2048)) ${PEER_ARGS:-} >"$out.peer.log" 2>&1 &
  pids+=($!)
  wait_ready "http://127.0.0.1:$peer_port" "${pids[1]}" ||
    { echo "ttft_bench: the peer did not start:" >&2; tail -20 "$out.peer.log" >&2; exit 1; }
  peer=(--peer-url "http://127.0.0.1:$peer_port")
fi
"$python" "$root/bench/ttft_bench.py" --url "http://127.0.0.1:$port" --clients "$clients" \
  "${peer[@]}" --json "$out.json" "$@"
