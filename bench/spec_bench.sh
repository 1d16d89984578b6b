#!/usr/bin/env bash
# Speculative decoding, single stream: decode tok/s with --speculative-config off and on, for a
# code-edit, a summarisation and a free-chat prompt; runs alternate (off on off on ...) so the
# machine's drift hits both alike; prints each workload's medians, their ratio, and the share
# of drafted tokens accepted. Greedy, `tachyon run` (the serving engine), time after the first
# token.
#
#   bench/spec_bench.sh MODEL.gguf [REPS] [SPEC_JSON]      (default 3 reps; ngram, k = 4)
#
# TEMPLATE=chatml (default) wraps each prompt in ChatML turns (SmolLM2, Qwen2.5); TEMPLATE=raw
# passes it as is. N (default 200) tokens are generated; THREADS (default 2). Run it on a quiet
# machine for figures; a smoke run only checks that it works.
set -euo pipefail
model=$1 reps=${2:-3}
spec=${3:-'{"method": "ngram", "num_speculative_tokens": 4}'}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TACHYON:-$root/build/tachyon}
n=${N:-200} threads=${THREADS:-2} template=${TEMPLATE:-chatml}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

code='def parse_config(path):
    """Reads a key=value file into a dict."""
    result = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, value = line.split("=", 1)
            result[key.strip()] = value.strip()
    return result


def write_config(path, config):
    with open(path, "w") as f:
        for key, value in sorted(config.items()):
            f.write(key + "=" + value + "\n")
'
article='The city council met on Tuesday to discuss the new bicycle lanes on Main Street. The
lanes, opened in March, were meant to make cycling safer and to reduce traffic downtown. Since
then, the number of cyclists on Main Street has doubled, according to counts by the transport
office, while car traffic fell by about a tenth. Shop owners are divided: some report more
customers arriving on foot and by bike, others say that the loss of parking spaces has hurt
their business. The council agreed to keep the lanes for another year, to add forty parking
spaces on side streets, and to publish new traffic counts every three months.'
declare -A prompts=(
  [code-edit]="Rewrite this Python file with the function parse_config renamed to read_config. Output the whole file and nothing else.

$code"
  [summarise]="Summarise this article in three sentences, reusing its wording.

$article"
  [chat]="What are three good habits for staying healthy? Explain each briefly."
)

wrap() {
  if [ "$template" = chatml ]; then
    printf '<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n' "$1"
  else
    printf '%s' "$1"
  fi
}

for w in code-edit summarise chat; do
  p=$(wrap "${prompts[$w]}")
  for i in $(seq "$reps"); do
    for side in off on; do
      args=(run -m "$model" -t "$threads" --temp 0 -n "$n" -p "$p")
      [ "$side" = on ] && args+=(--speculative-config "$spec")
      "$bin" "${args[@]}" > "$out/$w.$side.$i.txt" 2> "$out/$w.$side.$i.err"
    done
    cmp -s "$out/$w.off.$i.txt" "$out/$w.on.$i.txt" ||
      { echo "spec_bench: $w: the output with speculation differs" >&2; exit 1; }
  done
done

python3 - "$out" "$reps" <<'PY'
import pathlib, re, statistics, sys
out, reps = pathlib.Path(sys.argv[1]), int(sys.argv[2])
print(f"{'workload':<10} {'off tok/s':>10} {'on tok/s':>10} {'ratio':>6} {'accepted':>14}")
for w in ("code-edit", "summarise", "chat"):
    rate = {}
    acc = ""
    for side in ("off", "on"):
        vals = []
        for i in range(1, reps + 1):
            err = (out / f"{w}.{side}.{i}.err").read_text()
            vals.append(float(re.search(r"generated: \d+ tokens, ([\d.]+) tok/s", err).group(1)))
            m = re.search(r"speculative: \d+ drafts, (\d+) of (\d+) drafted", err)
            if m:
                acc = f"{m.group(1)}/{m.group(2)}"
        rate[side] = statistics.median(vals)
    print(f"{w:<10} {rate['off']:>10.2f} {rate['on']:>10.2f} {rate['on'] / rate['off']:>6.2f} "
          f"{acc:>14}")
PY
