#!/usr/bin/env bash
# Speculative decoding, single stream: decode tok/s with --speculative-config off and with each
# given config, for a code-edit, a summarisation and a free-chat prompt (bench/spec_prompts/).
#
# Paired rounds: in every round each config runs right beside a run without speculation of its
# own (off then on in odd rounds, on then off in even ones; the configs' order rotates from
# round to round), and the figure is the median over the rounds of the per-round ratio
# on / off, with its spread (the lower and upper quartiles of those ratios, the lowest and
# highest with fewer than 4 rounds). A machine's drift then cancels within a pair instead of
# between whole arms. `off` as a config is a second arm without speculation paired the same
# way: its median ratio and spread are the run's noise floor, what a config's ratio must clear
# to mean anything (a config whose quartiles lie within the noise arm's cannot be told from
# 1.0x). Also printed: the median tok/s of each side, the drafted tokens accepted, and per
# config the step times the cost rule measured last (target steps of 1 and 9 rows, a draft
# model's one-row forward; medians over the rounds).
# Greedy, `tachyon run` (the serving engine); tok/s is that of `run` (time after the first token).
#
# CONCURRENT=1 runs the two sides of each pair at the same time instead of one after the other,
# each pinned to one of CORES (default "0 1") with one thread (THREADS defaults to 1), the cores
# swapped from round to round. A change of the machine's speed during a run (neighbours on a
# VM's host, frequency) then meets both sides alike, where one after the other it falls between
# them: the per-round ratios spread several times less, at the price of measuring one-thread
# decode. For the no-loss questions (does speculation that drafts little cost anything?).
#
#   bench/spec_bench.sh MODEL.gguf [ROUNDS|auto] [SPEC_JSON|ngram|suffix|draft_model|off ...]
#       default: auto rounds; ngram and suffix, num_speculative_tokens K (default 8)
#   auto: as many rounds as fit about AUTO_S (default 40) seconds of one config's pairs, between
#       3 and MAX_ROUNDS (default 15), from the time of one warm-up run without speculation
#       (per workload; not counted): a small model whose run takes a second gets 15 rounds,
#       where its per-round noise is largest, a 1.5B model's 10-second runs get 3
#   draft_model: {"method": "draft_model", "model": $DRAFT, "num_speculative_tokens": K} (set
#       DRAFT to a model sharing MODEL's tokenizer), e.g. the Qwen2.5-Coder pair:
#       DRAFT=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf WORKLOADS=code-edit \
#         bench/spec_bench.sh qwen2.5-coder-1.5b-instruct-q4_k_m.gguf 5 draft_model off
#
# TEMPLATE=chatml (default) wraps each prompt in ChatML turns (SmolLM2, Qwen2.5); TEMPLATE=raw
# passes it as is. N (default 200) tokens are generated; THREADS (default 2); WORKLOADS
# (default "code-edit summarise chat"). Every config's text must equal its pair's text without
# speculation (greedy), or the script fails. Run it on a quiet machine for figures; a smoke run
# only checks that it works.
set -euo pipefail
model=$1 rounds=${2:-auto}
shift $(($# < 2 ? $# : 2))
specs=("$@")
[ ${#specs[@]} -eq 0 ] && specs=(ngram suffix)
k=${K:-8}  # num_speculative_tokens of the ngram / suffix / draft_model shorthands
for i in "${!specs[@]}"; do
  case ${specs[$i]} in
    ngram) specs[$i]="{\"method\": \"ngram\", \"num_speculative_tokens\": $k}" ;;
    suffix) specs[$i]="{\"method\": \"suffix\", \"num_speculative_tokens\": $k}" ;;
    draft_model)
      [ -n "${DRAFT:-}" ] || { echo "spec_bench: draft_model needs DRAFT=the draft model" >&2; exit 2; }
      specs[$i]="{\"method\": \"draft_model\", \"model\": \"$DRAFT\", \"num_speculative_tokens\": $k}" ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TACHYON:-$root/build/tachyon}
concurrent=${CONCURRENT:-0} cores=(${CORES:-0 1})
n=${N:-200} template=${TEMPLATE:-chatml}
threads=${THREADS:-$([ "$concurrent" = 1 ] && echo 1 || echo 2)}
workloads=${WORKLOADS:-"code-edit summarise chat"}
auto_s=${AUTO_S:-40} max_rounds=${MAX_ROUNDS:-15}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

wrap() {
  if [ "$template" = chatml ]; then
    printf '<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\nx' "$1"
  else
    printf '%sx' "$1"
  fi
}

# run WORKLOAD SIDE ROUND [SPEC [CORE]]: one `tachyon run` (pinned to CORE if given) into
# $out/WORKLOAD.SIDE.ROUND.{txt,err}.
run() {
  local args=(run -m "$model" -t "$threads" --temp 0 -n "$n" -p "$p") pin=()
  [ -n "${4:-}" ] && [ "$4" != off ] && args+=(--speculative-config "$4")
  [ -n "${5:-}" ] && pin=(taskset -c "$5")
  "${pin[@]}" "$bin" "${args[@]}" > "$out/$1.$2.$3.txt" 2> "$out/$1.$2.$3.err" ||
    { cat "$out/$1.$2.$3.err" >&2; exit 1; }
}

# pair WORKLOAD J ROUND: config J and a run without speculation beside it, one after the other
# (which first alternates) or, with CONCURRENT=1, at once on the two cores (swapped each round).
pair() {
  local w=$1 j=$2 i=$3
  if [ "$concurrent" = 1 ]; then
    local a b c=("${cores[@]}")
    [ $(((i + j) % 2)) -eq 0 ] && c=("${cores[1]}" "${cores[0]}")
    run "$w" "off$j" "$i" off "${c[0]}" & a=$!
    run "$w" "$j" "$i" "${specs[$j]}" "${c[1]}" & b=$!
    wait "$a"
    wait "$b"
  elif [ $(((i + j) % 2)) -eq 1 ]; then
    run "$w" "off$j" "$i"; run "$w" "$j" "$i" "${specs[$j]}"
  else
    run "$w" "$j" "$i" "${specs[$j]}"; run "$w" "off$j" "$i"
  fi
}

nspec=${#specs[@]}
for w in $workloads; do
  p=$(wrap "$(<"$root/bench/spec_prompts/$w.txt")")
  p=${p%x}  # (the x keeps the trailing newline through $(...))
  r=$rounds
  if [ "$r" = auto ]; then
    t0=$EPOCHREALTIME
    run "$w" warmup 0 off "$([ "$concurrent" = 1 ] && echo "${cores[0]}")"
    r=$(python3 -c "import sys; a = [float(x) for x in sys.argv[1:]]
print(max(3, min(int(a[3]), round(a[2] / (a[4] * (a[1] - a[0]))))))" \
      "$t0" "$EPOCHREALTIME" "$auto_s" "$max_rounds" $((concurrent == 1 ? 1 : 2)))
  fi
  echo "$r" > "$out/$w.rounds"
  echo "spec_bench: $w: $r rounds" >&2
  for i in $(seq "$r"); do
    for s in $(seq 0 $((nspec - 1))); do
      j=$(((s + i - 1) % nspec))  # the configs' order rotates from round to round
      pair "$w" "$j" "$i"
      if ! cmp -s "$out/$w.off$j.$i.txt" "$out/$w.$j.$i.txt"; then
        echo "spec_bench: $w: the output with ${specs[$j]} differs" >&2
        exit 1
      fi
    done
  done
done

python3 - "$out" "$workloads" "${specs[@]}" <<'PY'
import pathlib, re, statistics, sys
out, workloads, specs = pathlib.Path(sys.argv[1]), sys.argv[2].split(), sys.argv[3:]
for j, s in enumerate(specs):
    print(f"config {j}: {s}")
print("ratio: median of the per-round on/off ratios [spread: quartiles, or min-max under 4 rounds]")
print(f"{'workload':<10} {'rounds':>6} {'cfg':>4} {'off tok/s':>10} {'on tok/s':>9}"
      f" {'ratio':>6} {'spread':>13} {'accepted':>10}")

def tok_s(err):
    return float(re.search(r"generated: \d+ tokens, ([\d.]+) tok/s", err).group(1))

for w in workloads:
    rounds = int((out / f"{w}.rounds").read_text())
    costs = []
    for j in range(len(specs)):
        off, on, ratios, acc, dr, fwd = [], [], [], 0, 0, []
        for i in range(1, rounds + 1):
            e_off = (out / f"{w}.off{j}.{i}.err").read_text()
            e_on = (out / f"{w}.{j}.{i}.err").read_text()
            off.append(tok_s(e_off))
            on.append(tok_s(e_on))
            ratios.append(on[-1] / off[-1])
            m = re.search(r"speculative: \d+ drafts, (\d+) of (\d+) drafted", e_on)
            if m:
                acc += int(m.group(1))
                dr += int(m.group(2))
            m = re.search(r"speculative step ms by rows:(.*)", e_on)
            if m:
                rows = dict(x.split(":") for x in m.group(1).split(";")[0].split())
                d = re.search(r"draft model one-row forward ([\d.]+) ms", m.group(1))
                fwd.append((float(rows.get("1", "nan")), float(rows.get("2", "nan")),
                            float(rows.get("9", "nan")), float(d.group(1)) if d else float("nan")))
        if rounds >= 4:
            q = statistics.quantiles(ratios, n=4)
            lo, hi = q[0], q[2]
        else:
            lo, hi = min(ratios), max(ratios)
        # accepted / drafted tokens: the mean per run
        a = f"{round(acc / rounds)}/{round(dr / rounds)}" if specs[j] != "off" else ""
        print(f"{w:<10} {rounds:>6} {'c%d' % j:>4} {statistics.median(off):>10.2f}"
              f" {statistics.median(on):>9.2f} {statistics.median(ratios):>6.2f}"
              f" {f'{lo:.2f}-{hi:.2f}':>13} {a:>10}")
        if fwd:
            med = [statistics.median(f[k] for f in fwd) for k in range(4)]
            costs.append(f"c{j} target 1 row {med[0]:.2f}, 2 rows {med[1]:.2f}, 9 rows {med[2]:.2f},"
                         f" draft 1 row {med[3]:.2f} ms")
    for c in costs:  # the cost rule's last measurements (ms; nan: none), medians over rounds
        print(f"{'':<10} {c}")
PY
