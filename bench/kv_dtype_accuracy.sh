#!/usr/bin/env bash
# Accuracy of the KV cache dtypes on a real model: perplexity, mean KL divergence and top-1
# agreement of each dtype against f16 KV (the default), same model, same tokens. The f16 run
# saves its log-probabilities (`perplexity --kl-divergence-base`), each other dtype is scored
# against them (`--kl-divergence`). Threads only change the speed, not the figures: run it
# with -t 1 on a loaded machine.
#
#   bench/kv_dtype_accuracy.sh MODEL TEXT [CTX] [DTYPES] [CHUNKS]
#     CTX     tokens per window (default 512)
#     DTYPES  the dtypes to score (default "f32 q8_0 q4_1 q4_0")
#     CHUNKS  at most this many windows (default: all)
#   env: TACHYON_BINARY (default build/tachyon), THREADS (default 1)
# Prints one markdown row per dtype: | dtype | PPL | PPL ratio to f16 | mean KL | top-1 |.
# The base file holds n_chunks x CTX/2 x n_vocab floats (Qwen2.5, 152k vocabulary, 17 windows
# of 512: 2.6 GB) in a temporary folder, removed at exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TACHYON_BINARY:-$root/build/tachyon}
model=$1 text=$2 ctx=${3:-512} dtypes=${4:-"f32 q8_0 q4_1 q4_0"} chunks=${5:-}
threads=${THREADS:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
extra=()
[ -n "$chunks" ] && extra=(--chunks "$chunks")
base_out=$("$bin" perplexity -m "$model" -f "$text" -c "$ctx" -t "$threads" "${extra[@]}" \
  --kv-cache-dtype f16 --kl-divergence-base "$work/base.kld" 2>/dev/null)
ppl=$(sed -n 's/^perplexity: \([0-9.]*\) +\/- \([0-9.]*\) over \([0-9]*\) chunks.*(\([0-9]*\) scored).*/\1 +- \2 (\3 windows, \4 tokens scored)/p' <<<"$base_out")
echo "model $(basename "$model"), ctx $ctx, f16 KV: perplexity $ppl"
echo "| KV dtype | perplexity | PPL ratio to f16 | mean KL to f16 | top-1 agreement |"
echo "|---|---:|---:|---:|---:|"
for d in $dtypes; do
  out=$("$bin" perplexity -m "$model" -t "$threads" "${extra[@]}" --kv-cache-dtype "$d" \
    --kl-divergence-base "$work/base.kld" --kl-divergence 2>/dev/null)
  p=$(sed -n 's/^perplexity (model): *\([0-9.]*\) +\/- \([0-9.]*\)/\1 +- \2/p' <<<"$out")
  r=$(sed -n 's/^perplexity ratio: *\([0-9.]*\)/\1/p' <<<"$out")
  kl=$(sed -n 's/^mean KL divergence: *\([0-9.]*\) +\/- \([0-9.]*\).*/\1 +- \2/p' <<<"$out")
  t1=$(sed -n 's/^top-1 agreement: *\([0-9.]*%\) +\/- \([0-9.]*%\)/\1 +- \2/p' <<<"$out")
  echo "| $d | $p | $r | $kl | $t1 |"
done
