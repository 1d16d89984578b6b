#!/usr/bin/env bash
# Speculative decoding, single stream: decode tok/s with --speculative-config off and with each
# given config, for a code-edit, a summarisation and a free-chat prompt (bench/spec_prompts/);
# runs alternate (off, config 1, config 2, ..., then config 1, config 2, ..., off, ...: each round
# starts one arm later) so the machine's drift and any bias of a place in the rotation hit all
# alike;
# prints each workload's medians, the ratios to off, and the share of drafted tokens accepted,
# and per config the step times the cost rule measured last (target steps of 1 and 9 rows, a
# draft model's one-row forward; medians over the rounds).
# Greedy, `tachyon run` (the serving engine); tok/s is that of `run` (time after the first token).
#
#   bench/spec_bench.sh MODEL.gguf [REPS] [SPEC_JSON|ngram|suffix|draft_model|off ...]
#       default: 3 reps; ngram and suffix, num_speculative_tokens 8
#   off: a second arm without speculation, run in the same rotation: its ratio to off is the
#       noise floor of the run (what a config's ratio must clear to mean anything)
#   draft_model: {"method": "draft_model", "model": $DRAFT, "num_speculative_tokens": 8} (set
#       DRAFT to a model sharing MODEL's tokenizer), e.g. the Qwen2.5-Coder pair:
#       DRAFT=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf WORKLOADS=code-edit \
#         bench/spec_bench.sh qwen2.5-coder-1.5b-instruct-q4_k_m.gguf 5 draft_model
#
# TEMPLATE=chatml (default) wraps each prompt in ChatML turns (SmolLM2, Qwen2.5); TEMPLATE=raw
# passes it as is. N (default 200) tokens are generated; THREADS (default 2); WORKLOADS
# (default "code-edit summarise chat"). Every config's text must equal the text without
# speculation (greedy), or the script fails. Run it on a quiet machine for figures; a smoke run
# only checks that it works.
set -euo pipefail
model=$1 reps=${2:-3}
shift $(($# < 2 ? $# : 2))
specs=("$@")
[ ${#specs[@]} -eq 0 ] && specs=(ngram suffix)
for i in "${!specs[@]}"; do
  case ${specs[$i]} in
    ngram) specs[$i]='{"method": "ngram", "num_speculative_tokens": 8}' ;;
    suffix) specs[$i]='{"method": "suffix", "num_speculative_tokens": 8}' ;;
    draft_model)
      [ -n "${DRAFT:-}" ] || { echo "spec_bench: draft_model needs DRAFT=the draft model" >&2; exit 2; }
      specs[$i]="{\"method\": \"draft_model\", \"model\": \"$DRAFT\", \"num_speculative_tokens\": 8}" ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TACHYON:-$root/build/tachyon}
n=${N:-200} threads=${THREADS:-2} template=${TEMPLATE:-chatml}
workloads=${WORKLOADS:-"code-edit summarise chat"}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

wrap() {
  if [ "$template" = chatml ]; then
    printf '<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\nx' "$1"
  else
    printf '%sx' "$1"
  fi
}

for w in $workloads; do
  p=$(wrap "$(<"$root/bench/spec_prompts/$w.txt")")
  p=${p%x}  # (the x keeps the trailing newline through $(...))
  sides=(off $(seq 0 $((${#specs[@]} - 1))))
  for i in $(seq "$reps"); do
    # Each round starts one arm later (off first, then config 0 first, ...), so whatever
    # favours a place in the rotation favours every arm alike.
    order=("${sides[@]:$(((i - 1) % ${#sides[@]}))}" "${sides[@]:0:$(((i - 1) % ${#sides[@]}))}")
    for side in "${order[@]}"; do
      args=(run -m "$model" -t "$threads" --temp 0 -n "$n" -p "$p")
      [ "$side" != off ] && [ "${specs[$side]}" != off ] && args+=(--speculative-config "${specs[$side]}")
      "$bin" "${args[@]}" > "$out/$w.$side.$i.txt" 2> "$out/$w.$side.$i.err" ||
        { cat "$out/$w.$side.$i.err" >&2; exit 1; }
    done
    for side in "${sides[@]:1}"; do
      if ! cmp -s "$out/$w.off.$i.txt" "$out/$w.$side.$i.txt"; then
        echo "spec_bench: $w: the output with ${specs[$side]} differs" >&2
        exit 1
      fi
    done
  done
done

python3 - "$out" "$reps" "$workloads" "${specs[@]}" <<'PY'
import pathlib, re, statistics, sys
out, reps, workloads, specs = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
for j, s in enumerate(specs):
    print(f"config {j}: {s}")
head = f"{'workload':<10} {'off tok/s':>10}"
for j in range(len(specs)):
    head += f" {'c%d tok/s' % j:>9} {'ratio':>6} {'accepted':>10}"
print(head)
for w in workloads:
    line = ""
    def median(side):
        vals, acc, fwd = [], "", []
        for i in range(1, reps + 1):
            err = (out / f"{w}.{side}.{i}.err").read_text()
            vals.append(float(re.search(r"generated: \d+ tokens, ([\d.]+) tok/s", err).group(1)))
            m = re.search(r"speculative: \d+ drafts, (\d+) of (\d+) drafted", err)
            if m:
                acc = f"{m.group(1)}/{m.group(2)}"
            m = re.search(r"speculative step ms by rows:(.*)", err)
            if m:
                rows = dict(x.split(":") for x in m.group(1).split(";")[0].split())
                d = re.search(r"draft model one-row forward ([\d.]+) ms", m.group(1))
                fwd.append((float(rows.get("1", "nan")), float(rows.get("9", "nan")),
                            float(d.group(1)) if d else float("nan")))
        if fwd:
            med = [statistics.median(f[j] for f in fwd) for j in range(3)]
            costs.append(f"c{side} target 1 row {med[0]:.1f}, 9 rows {med[1]:.1f}, draft 1 row {med[2]:.1f}")
        return statistics.median(vals), acc
    costs = []
    off, _ = median("off")
    line = f"{w:<10} {off:>10.2f}"
    for j in range(len(specs)):
        on, acc = median(str(j))
        line += f" {on:>9.2f} {on / off:>6.2f} {acc:>10}"
    print(line)
    for c in costs:  # the cost rule's last measurements (ms; nan: none), medians over rounds
        print(f"{'':<10} {c}")
PY
