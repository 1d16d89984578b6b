#!/usr/bin/env bash
# Speculative decoding under concurrency: `tachyon bench --concurrency N` for each level N of
# LEVELS (the serving engine, N requests at once, greedy, P prompt / G generated tokens each)
# with --speculative-config off and on, the two side by side at each level of every round
# (which runs first alternates); prints per level the median aggregate and decode tok/s off
# and on, the median over the rounds of each round's on / off ratio with its spread (quartiles,
# or lowest and highest under 4 rounds), and the drafted tokens accepted, then the crossover:
# the lowest level from which on/off stays below 1.0.
#
#   bench/spec_sweep.sh MODEL.gguf [ROUNDS] [SPEC_JSON]
#       default: 3 rounds; '{"method": "ngram", "num_speculative_tokens": 8}' (whose
#       disable_by_batch_size default switches drafting off at large batches)
#
# The batch-size crossover (docs/speculative.md) is measured with drafting never switched off:
#   bench/spec_sweep.sh MODEL.gguf 3 '{"method": "ngram", "num_speculative_tokens": 8,
#       "disable_by_batch_size": 1000000}'
# LEVELS (default 1,2,4,8,16,32), P (default 64), G (default 128), THREADS (default 2, 1 with
# CONCURRENT=1).
# BUDGET_S (default: none): a bound on the whole sweep's seconds; no round starts that the
# rounds before say would end past it (the first always runs), and the figures are the medians
# of the rounds run. Each round prints its seconds on stderr.
# CONCURRENT=1: off and on run at the same time, each pinned to one of CORES (default "0 1") with
# one thread (THREADS defaults to 1), the cores swapped from round to round, so that a change of
# the machine's speed meets both alike (bench/spec_bench.sh says more); it measures one-thread
# engines. (Where a level's runs are short, each core's own scatter dominates and the spread
# does not narrow: docs/speculative.md.)
# bench's prompts are random token ids: drafts hit where the greedy output repeats itself.
set -euo pipefail
model=$1 rounds=${2:-3}
spec=${3:-'{"method": "ngram", "num_speculative_tokens": 8}'}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TACHYON:-$root/build/tachyon}
concurrent=${CONCURRENT:-0} cores=(${CORES:-0 1})
levels=${LEVELS:-1,2,4,8,16,32} p=${P:-64} g=${G:-128}
threads=${THREADS:-$([ "$concurrent" = 1 ] && echo 1 || echo 2)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

start=$SECONDS done=0
for i in $(seq "$rounds"); do
  elapsed=$((SECONDS - start))
  if [ -n "${BUDGET_S:-}" ] && [ "$done" -gt 0 ] &&
     [ $((elapsed + elapsed / done)) -gt "$BUDGET_S" ]; then
    echo "spec_sweep: $done of $rounds rounds within BUDGET_S=$BUDGET_S s" >&2
    break
  fi
  # Each level is a `tachyon bench` of its own per side, so that the two sides run the same
  # level at the same time (concurrent) or right after each other. Each round starts on the
  # other side (or, concurrent, swaps the cores), so neither is always first after a pause nor
  # always on the same core.
  sides=(off on)
  [ $((i % 2)) -eq 0 ] && sides=(on off)
  for lvl in ${levels//,/ }; do
    pids=()
    for k in 0 1; do
      side=${sides[$k]} f=$out/${sides[$k]}.$i.$lvl
      args=(bench -m "$model" -t "$threads" --concurrency "$lvl" -p "$p" -n "$g" --json)
      [ "$side" = on ] && args+=(--speculative-config "$spec")
      if [ "$concurrent" = 1 ]; then
        taskset -c "${cores[$k]}" "$bin" "${args[@]}" > "$f.json" 2> "$f.err" &
        pids+=($!)
      else
        "$bin" "${args[@]}" > "$f.json" 2> "$f.err" || { cat "$f.err" >&2; exit 1; }
      fi
    done
    for k in "${!pids[@]}"; do
      wait "${pids[$k]}" || { cat "$out/${sides[$k]}.$i.$lvl.err" >&2; exit 1; }
    done
  done
  done=$i
  echo "spec_sweep: round $i done at $((SECONDS - start)) s" >&2
done
rounds=$done

python3 - "$out" "$rounds" "$spec" "$levels" <<'PY'
import json, pathlib, statistics, sys
out, rounds, spec = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
levels = sys.argv[4].split(",")
# runs[side][round][level index]: each level's bench prints a list of one level
runs = {s: [[json.loads((out / f"{s}.{i}.{l}.json").read_text())[0] for l in levels]
            for i in range(1, rounds + 1)] for s in ("off", "on")}

def ratio(k, key):
    """The median over the rounds of on / off at level k, and its spread."""
    r = [on[k][key] / off[k][key] for on, off in zip(runs["on"], runs["off"])]
    lo, hi = (statistics.quantiles(r, n=4)[0::2] if len(r) >= 4 else (min(r), max(r)))
    return statistics.median(r), f"{lo:.2f}-{hi:.2f}"

print(f"spec: {spec}")
print("ratio: median of the per-round on/off ratios [spread: quartiles, or min-max under 4 rounds]")
print(f"{'conc':>4} {'off agg':>9} {'on agg':>9} {'ratio':>6} {'spread':>11} {'off dec':>9}"
      f" {'on dec':>9} {'ratio':>6} {'spread':>11} {'accepted':>14}")
ratios = []
for k, lvl in enumerate(runs["off"][0]):
    med = {s: (statistics.median(r[k]["aggregate_tok_s"] for r in runs[s]),
               statistics.median(r[k]["decode_tok_s"] for r in runs[s])) for s in runs}
    agg, agg_sp = ratio(k, "aggregate_tok_s")
    dec, dec_sp = ratio(k, "decode_tok_s")
    ratios.append((lvl["concurrency"], agg))
    acc = sum(r[k].get("spec_accepted_tokens", 0) for r in runs["on"])
    dr = sum(r[k].get("spec_draft_tokens", 0) for r in runs["on"])
    print(f"{lvl['concurrency']:>4} {med['off'][0]:>9.1f} {med['on'][0]:>9.1f} {agg:>6.2f}"
          f" {agg_sp:>11} {med['off'][1]:>9.1f} {med['on'][1]:>9.1f} {dec:>6.2f} {dec_sp:>11}"
          f" {f'{acc}/{dr}':>14}")
# The crossover: the lowest level from which speculation's aggregate tok/s stays below off's.
cross = next((c for i, (c, _) in enumerate(ratios) if all(x < 1.0 for _, x in ratios[i:])), None)
if cross is None:
    print(f"crossover: none up to {ratios[-1][0]} (speculation pays or ties at every level)")
else:
    print(f"crossover: {cross} (on/off < 1.0 from there on; disable_by_batch_size {cross})")
PY
