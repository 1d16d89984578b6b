#!/usr/bin/env bash
# Conformance fuzzing of the HTTP API: schemathesis (installed in .venv by scripts/setup.sh)
# generates requests from docs/openapi.yaml, valid and invalid, and sends them to a real
# `tachyon serve` on stories260K (context 128, so every generation is short). It fails on any 5xx,
# any response whose status, headers, content type or body the spec does not allow, any
# schema-invalid request that is not rejected with a 4xx, an ignored API key, a missing 405 or
# Allow header; afterwards the server must still be alive and exit cleanly on SIGTERM.
# Not checked: "positive_data_acceptance" (every schema-valid request accepted), because some
# rules depend on the model or on several fields together and live in the spec's prose (token
# ids below the vocabulary, prompt + max_tokens within the context, stream_options only with
# stream, top_logprobs only with logprobs, tool_choice naming one of the tools).
# Bounded in time: at most --max-time seconds of generation (default 90), --max-examples cases
# per operation and phase (default 100). The seed is fixed so a failure reproduces; pass
# --seed N (or SCHEMATHESIS_SEED) to explore others.
# Usage: scripts/schemathesis.sh [--max-time S] [--max-examples N] [--seed N]
#   env: TACHYON_BINARY (default build/tachyon), TACHYON_TESTDATA (default ../shared/testdata)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
max_time=90
max_examples=100
seed=${SCHEMATHESIS_SEED:-20261201}
while [ $# -gt 0 ]; do
  case "$1" in
    --max-time) max_time=$2; shift 2 ;;
    --max-examples) max_examples=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "usage: $0 [--max-time S] [--max-examples N] [--seed N]" >&2; exit 2 ;;
  esac
done
binary=${TACHYON_BINARY:-$root/build/tachyon}
model="${TACHYON_TESTDATA:-$root/../shared/testdata}/stories260K/stories260K.gguf"
st="$root/.venv/bin/schemathesis"
[ -x "$binary" ] || { echo "schemathesis.sh: no tachyon binary at $binary" >&2; exit 1; }
[ -x "$st" ] || { echo "schemathesis.sh: $st missing (run scripts/setup.sh)" >&2; exit 1; }
if [ ! -f "$model" ]; then
  echo "schemathesis.sh: skipped: test model missing: $model (set TACHYON_TESTDATA)"
  exit 0
fi

work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill -9 "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
# stories260K has no chat template: one "role: content" line per message.
printf '%s' "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}
{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}" >"$work/chat.jinja"
key="schemathesis-key"
"$binary" serve -m "$model" --host 127.0.0.1 --port 0 --threads 1 --max-model-len 128 \
  --served-model-name stories --api-key "$key" --chat-template "$work/chat.jinja" \
  >"$work/ready" 2>"$work/server.log" &
server=$!
for _ in $(seq 600); do
  grep -q "ready at" "$work/ready" && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q "ready at" "$work/ready"; then
  cat "$work/server.log" >&2
  echo "schemathesis.sh: tachyon serve did not start" >&2
  exit 1
fi
port=$(sed -n 's|.*ready at http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$work/ready")

echo "== schemathesis: docs/openapi.yaml against tachyon serve on port $port" \
     "(max ${max_time}s, ${max_examples} examples, seed $seed)"
rc=0
"$st" run docs/openapi.yaml --url "http://127.0.0.1:$port" -H "Authorization: Bearer $key" \
  --max-time "$max_time" --max-examples "$max_examples" --seed "$seed" --workers 1 \
  --request-timeout 30 --exclude-checks positive_data_acceptance --no-color \
  --report ndjson --report-ndjson-path "$work/events.ndjson" || rc=$?
if ! kill -0 "$server" 2>/dev/null; then
  server=""
  tail -n 50 "$work/server.log" >&2
  echo "schemathesis.sh: FAILED: the server died during the run" >&2
  exit 1
fi
requests=$(grep -o '"status_code": *[0-9]*' "$work/events.ndjson" 2>/dev/null | wc -l || true)
statuses=$(grep -o '"status_code": *[0-9]*' "$work/events.ndjson" 2>/dev/null |
           grep -o '[0-9]*$' | sort | uniq -c | awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}' || true)
echo "schemathesis.sh: $requests responses checked (status: ${statuses:-none})"
kill -TERM "$server"
src=0
wait "$server" || src=$?
server=""
if [ "$src" -ne 0 ]; then
  tail -n 50 "$work/server.log" >&2
  echo "schemathesis.sh: FAILED: tachyon serve exited with $src on SIGTERM" >&2
  exit 1
fi
if [ "$rc" -ne 0 ]; then
  echo "schemathesis.sh: FAILED (schemathesis exit $rc; see the failures above)" >&2
  exit "$rc"
fi
echo "schemathesis.sh: passed"
