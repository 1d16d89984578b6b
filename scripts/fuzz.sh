#!/usr/bin/env bash
# Builds the libFuzzer targets (in the sanitizer build, build-asan/: clang, ASan + UBSan +
# coverage; only the fuzz/*_fuzz.cc targets and the libraries they link, when the tree is not
# built yet) and runs each for SECONDS (default 60), as many at a time as there are cores.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      e.g. scripts/fuzz.sh 300 gguf_fuzz
#
# Corpora live in a temporary directory (never in git), seeded per target: small GGUF files of
# ../shared/testdata and tiny hand-made ones (gguf_fuzz, tokenizer_fuzz), compact vocabulary
# descriptions (tokenizer_fuzz), request bodies (openai_request_fuzz), raw HTTP requests
# (http_request_fuzz), grammars and regexes (gbnf_fuzz), disk KV tier segments (kv_disk_fuzz).
# Crash reproducers are written to $FUZZ_ARTIFACTS (default build-asan/fuzz-artifacts/); a crash
# makes the script exit non-zero. Other knobs: FUZZ_MAX_LEN (default 65536; longer seeds are
# truncated to it), FUZZ_SEED_MAX_BYTES (default 2 MiB).
# docs/fuzzing.md describes the targets and what they found.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
shift || true

mapfile -t all_targets < <(cd "$root/fuzz" && ls *_fuzz.cc 2>/dev/null | sed 's/\.cc$//')
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
((${#targets[@]})) || { echo "fuzz.sh: no fuzz/*_fuzz.cc targets" >&2; exit 1; }

# Configures build-asan/ (scripts/build.sh asan) and builds only these targets.
"$root/scripts/build.sh" asan "${targets[@]}"

testdata=${TACHYON_TESTDATA:-$root/../shared/testdata}
max_seed=${FUZZ_SEED_MAX_BYTES:-2097152}
artifacts=${FUZZ_ARTIFACTS:-$root/build-asan/fuzz-artifacts}
mkdir -p "$artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Tiny valid GGUF files (every value type, nested arrays, a few tensor types) as seeds.
make_gguf_seeds() {
  command -v python3 >/dev/null || return 0
  python3 - "$1" <<'EOF'
import struct, sys
out = sys.argv[1]
def s(x): b = x.encode(); return struct.pack('<Q', len(b)) + b
def kv(key, t, payload): return s(key) + struct.pack('<I', t) + payload
def pad(b, a): return b + b'\0' * (-len(b) % a)
def gguf(kvs, tensors, align=32):
    head = b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kvs)) + b''.join(kvs)
    data, off = b'', 0
    for name, dims, typ, nbytes in tensors:
        head += s(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims)
        head += struct.pack('<IQ', typ, len(data))
        data = pad(data + bytes((i * 7) & 255 for i in range(nbytes)), align)
    return pad(head, align) + data if tensors else head
meta = [kv('general.architecture', 8, s('llama')), kv('llama.block_count', 4, struct.pack('<I', 2)),
        kv('u8', 0, b'\x05'), kv('i8', 1, b'\xfb'), kv('u16', 2, b'\1\2'), kv('i16', 3, b'\xff\xff'),
        kv('i32', 5, struct.pack('<i', -3)), kv('f32', 6, struct.pack('<f', 1e-5)),
        kv('bool', 7, b'\1'), kv('u64', 10, struct.pack('<Q', 9)), kv('i64', 11, struct.pack('<q', -9)),
        kv('f64', 12, struct.pack('<d', 0.5)),
        kv('tokenizer.ggml.tokens', 9, struct.pack('<IQ', 8, 3) + s('<s>') + s('</s>') + s('a')),
        kv('tokenizer.ggml.bos_token_id', 4, struct.pack('<I', 0)),
        kv('nested', 9, struct.pack('<IQ', 9, 2) + struct.pack('<IQ', 5, 1) + struct.pack('<i', 4)
           + struct.pack('<IQ', 5, 0))]
tensors = [('a', [4], 0, 16), ('b', [32, 2], 8, 68), ('c', [2, 3], 1, 12), ('d', [256], 12, 144)]
open(out + '/seed_model.gguf', 'wb').write(gguf(meta, tensors))
open(out + '/seed_align64.gguf', 'wb').write(
    gguf(meta[:2] + [kv('general.alignment', 4, struct.pack('<I', 64))], tensors[:2], 64))
open(out + '/seed_vocab.gguf', 'wb').write(gguf(meta[12:14], []))
EOF
}

# tokenizer_fuzz's compact vocabularies (see fuzz/tokenizer_fuzz.cc): byte 0 picks the model,
# then "<type byte><spelling>" lines up to a NUL line, then the text to encode.
make_vocab_seeds() {
  local d=$1
  printf '\x00\x32<unk>\n\x33<s>\n\x33</s>\n\x36<0x41>\n\x36<0xZZ>\n\x31\xe2\x96\x81a\n\x31b\n\x31ab\n\x00\nab a <s>b' >"$d/vocab_llama"
  printf '\x01\x31a\n\x31b\n\x31ab\n\x31\xc4\xa0\n\x33<|endoftext|>\nma b\n\x00\nab ab<|endoftext|>' >"$d/vocab_gpt2"
  printf '\x02\x33[CLS]\n\x33[SEP]\n\x32[UNK]\n\x31hello\n\x31##lo\n\x31world\n\x00\nhello world HELLO' >"$d/vocab_bert"
  printf '\xc0\x36<0x00>\n\x36<0xff>\n\x36<0x-1>\n\x36<0x 1>\n\x34<tool>\n\x00\n\xff\xfe<tool>\x00' >"$d/vocab_bytes"
}

# openai_request_fuzz: request bodies for both endpoints.
make_body_seeds() {
  local d=$1
  cat >"$d/chat.json" <<'JSON'
{"model": "m", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "2"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}], "tool_choice": {"type": "function", "function": {"name": "f"}}, "parallel_tool_calls": false, "max_completion_tokens": 5, "temperature": 0.5, "top_p": 0.9, "logprobs": true, "top_logprobs": 2, "stream": true, "stream_options": {"include_usage": true}, "chat_template_kwargs": {"enable_thinking": false}, "response_format": {"type": "text"}, "user": "u", "metadata": {"k": "v"}, "store": false}
JSON
  cat >"$d/completion.json" <<'JSON'
{"model": "m", "prompt": [[1, 2, 3], "text"], "max_tokens": 7, "n": 2, "best_of": 2, "echo": true, "logprobs": 3, "logit_bias": {"5": -100, "7": 2.5}, "seed": -1, "stop": ["\n", "x"], "presence_penalty": 0.1, "frequency_penalty": -0.1, "repetition_penalty": 1.1, "top_k": 40, "min_p": 0.05, "ignore_eos": true, "priority": 3, "suffix": ""}
JSON
  printf '{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object"}}}}' >"$d/response_format.json"
  python3 -c 'print("{\"messages\":" + "[" * 70 + "]" * 70 + "}")' >"$d/deep.json" 2>/dev/null || true
}

# http_request_fuzz: raw requests (pipelined, chunked, 100-continue, bad framing).
make_http_seeds() {
  local d=$1 body='{"prompt": "ab", "max_tokens": 3}'
  printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
    "${#body}" "$body" >"$d/completion.http"
  printf 'GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n' >"$d/pipelined.http"
  printf 'POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n2f\r\n{"messages": [{"role": "user", "content": "h"}]\r\n1\r\n}\r\n0\r\n\r\n' >"$d/chunked.http"
  printf 'POST /tokenize HTTP/1.1\r\nContent-Length: 16\r\n\r\n{"prompt": "ab"}POST /detokenize HTTP/1.1\r\nContent-Length: 17\r\n\r\n{"tokens": [1,2]}' >"$d/tokenize.http"
  printf 'DELETE /v1/models/tiny HTTP/1.0\r\nAuthorization: Bearer k\r\n\r\n' >"$d/method.http"
}

# gbnf_fuzz: grammars (GBNF; a leading 'R' makes the rest a regex).
make_gbnf_seeds() {
  local d=$1
  printf 'root ::= "{" ws pair ("," ws pair)* "}"\npair ::= [a-z]+ ":" ws ("true" | [0-9]{1,3})\nws ::= [ \\t\\n]{0,2} # c\n' >"$d/json.gbnf"
  printf 'root ::= ( "a" | [^"\\\\] | "\\u00e9" )* "." x?\nx ::= "(" root ")" | [\\U0001F600-\\U0001F64F]\n' >"$d/nested.gbnf"
  printf 'R^(\\d{3}-[a-z]+|(?:x|y)*?z.)$' >"$d/regex"
}

# kv_wire_fuzz: KV transfer streams (src/kv/kv_wire.h) with zero checksums and a first byte
# with the top bit set (the target reseals every frame) and piece size 5; one stream of two
# blocks (a layer frame per slot, both blocks in it), one with an aborted end, one with two
# layer groups.
make_kv_wire_seeds() {
  command -v python3 >/dev/null || return 0
  python3 - "$1" <<'EOF2'
import struct, sys
out = sys.argv[1]
def frame(t, payload): return struct.pack('<IHHQ', 0x57564B54, 3, t, len(payload)) + payload + bytes(8)
def stream(blocks, lpb=2, layers=2, chunk=8, status=0):
    shape = struct.pack('<QQIIIIIIIQ', 1, 2, 1, 4, layers, lpb, 1, 2, 2 * lpb, chunk)
    out = frame(1, shape + struct.pack('<II', len(blocks) + 1, 3) + b'r-1')
    for group in sorted({g for _, g in blocks}):
        mine = [i for i, g in blocks if g == group]
        for slot in range(lpb):  # a layer frame per slot: entries, then K and V chunks
            entries = b''.join(struct.pack('<IIQQ', i, slot, i + 1, 7) for i in mine)
            chunks = bytes(range(2 * chunk)) * len(mine)
            out += frame(2, struct.pack('<IIII', len(mine), group, 0, 0) + entries + chunks)
    return b'\x85' + out + frame(3, struct.pack('<II', len(blocks), status))
open(out + '/two_blocks', 'wb').write(stream([(0, 0), (1, 0)]))
open(out + '/aborted', 'wb').write(stream([(0, 0)], status=1))
open(out + '/groups', 'wb').write(stream([(0, 0), (0, 1)], lpb=1, layers=2))
EOF2
}
# Disk KV tier segments (kv_disk_fuzz): records of identity (0x1111, 0x2222) with zero checksums
# behind a first byte whose top bit makes the target reseal them; 0x40: a 4 KiB tier.
make_kv_disk_seeds() {
  command -v python3 >/dev/null || return 0
  python3 - "$1" <<'EOF2'
import struct, sys
out = sys.argv[1]
def rec(key, seq, payload, ident=(0x1111, 0x2222), version=2):
    return (b'TKVB' + struct.pack('<I2Q2Q4Q', version, *ident, key, key + 1, seq, len(payload), 0, 0)
            + payload)
end = bytes(72)
two = rec(1, 1, bytes(range(40))) + rec(2, 2, bytes(24))
open(out + '/two', 'wb').write(b'\x80' + two + end)
open(out + '/two_small_tier', 'wb').write(b'\xc0' + two + end)
open(out + '/stale_tail', 'wb').write(b'\x80' + rec(3, 9, bytes(16)) + end + rec(1, 4, bytes(16)))
open(out + '/out_of_order', 'wb').write(b'\x80' + two + rec(3, 1, bytes(8)))
open(out + '/truncated', 'wb').write(b'\x80' + two[:-10])
open(out + '/other_model', 'wb').write(b'\x80' + rec(1, 1, bytes(8), ident=(5, 6)) + end)
open(out + '/version1', 'wb').write(b'\x80' + rec(1, 1, bytes(8), version=1))
EOF2
}

# run_target T: one fuzzer over its corpus; its output goes to $work/T.log.
run_target() {
  "$root/build-asan/$1" "$work/$1" -max_total_time="$secs" -max_len="${FUZZ_MAX_LEN:-65536}" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$1-" >"$work/$1.log" 2>&1 || true
}

status=0
for t in "${targets[@]}"; do
  bin="$root/build-asan/$t"
  [ -x "$bin" ] || { echo "fuzz.sh: $bin not built" >&2; status=1; continue; }
  corpus="$work/$t"
  mkdir -p "$corpus"
  case "$t" in
    gguf_fuzz)
      make_gguf_seeds "$corpus"
      if [ -d "$testdata" ]; then
        find "$testdata" -name '*.gguf' -size -"$((max_seed / 1024 + 1))"k \
          -exec cp -t "$corpus" {} + 2>/dev/null || true
      fi
      ;;
    tokenizer_fuzz)
      make_gguf_seeds "$corpus"
      make_vocab_seeds "$corpus"
      ;;
    jinja_fuzz)
      if [ -d "$testdata/chat-templates" ]; then
        find "$testdata/chat-templates" -name '*.jinja' -size -64k \
          -exec cp -t "$corpus" {} + 2>/dev/null || true
      fi
      ;;
    openai_request_fuzz) make_body_seeds "$corpus" ;;
    http_request_fuzz) make_http_seeds "$corpus" ;;
    gbnf_fuzz) make_gbnf_seeds "$corpus" ;;
    kv_wire_fuzz) make_kv_wire_seeds "$corpus" ;;
    kv_disk_fuzz) make_kv_disk_seeds "$corpus" ;;
  esac
  echo "== $t: ${secs}s, $(ls "$corpus" | wc -l) seed files"
  run_target "$t" &
  while (($(jobs -rp | wc -l) >= $(nproc))); do wait -n || true; done
done
wait
for t in "${targets[@]}"; do
  [ -f "$work/$t.log" ] || continue
  echo "== $t"
  grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::|==[0-9]+==ERROR|SUMMARY|.*artifact)' \
    "$work/$t.log" || true
  if grep -qE '==[0-9]+==ERROR|deadly signal|Test unit written' "$work/$t.log"; then
    echo "fuzz.sh: $t FOUND A CRASH; reproducers in $artifacts" >&2
    status=1
  fi
done
exit $status
