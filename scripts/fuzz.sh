#!/usr/bin/env bash
# Builds the libFuzzer targets (scripts/build.sh fuzz: clang, ASan + UBSan) and runs each
# fuzz/*_fuzz.cc target for SECONDS (default 60).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      e.g. scripts/fuzz.sh 300 gguf_fuzz
#
# Corpora live in a temporary directory (never in git), seeded from small files of
# ../shared/testdata (<target>'s seeds; GGUF files up to FUZZ_SEED_MAX_BYTES, default 2 MiB)
# plus a few tiny hand-made GGUF files. Crash reproducers are written to
# $FUZZ_ARTIFACTS (default build-fuzz/artifacts/); a crash makes the script exit non-zero.
# Other knob: FUZZ_MAX_LEN (default 65536; longer seeds are truncated to it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
shift || true

mapfile -t all_targets < <(cd "$root/fuzz" && ls *_fuzz.cc 2>/dev/null | sed 's/\.cc$//')
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
((${#targets[@]})) || { echo "fuzz.sh: no fuzz/*_fuzz.cc targets" >&2; exit 1; }

# Build: the first time through scripts/build.sh fuzz (configures build-fuzz/ and builds the
# tree); once configured, only the fuzz targets are rebuilt. If the whole tree does not build
# (unrelated work in progress), the fuzz targets alone are built.
if [ -f "$root/build-fuzz/build.ninja" ] || ! "$root/scripts/build.sh" fuzz; then
  cmake --build "$root/build-fuzz" -j "$(nproc)" --target "${targets[@]}"
fi

testdata=${TACHYON_TESTDATA:-$root/../shared/testdata}
max_seed=${FUZZ_SEED_MAX_BYTES:-2097152}
artifacts=${FUZZ_ARTIFACTS:-$root/build-fuzz/artifacts}
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

status=0
for t in "${targets[@]}"; do
  bin="$root/build-fuzz/$t"
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
  esac
  echo "== $t: ${secs}s, $(ls "$corpus" | wc -l) seed files"
  if ! "$bin" "$corpus" -max_total_time="$secs" -max_len="${FUZZ_MAX_LEN:-65536}" \
      -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$artifacts/$t-" 2>&1 | tee "$work/$t.log" | grep -E \
      '^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::|==[0-9]+==ERROR|SUMMARY|.*artifact)' ; then
    :
  fi
  if grep -qE '==[0-9]+==ERROR|deadly signal|Test unit written' "$work/$t.log"; then
    echo "fuzz.sh: $t FOUND A CRASH; reproducers in $artifacts" >&2
    status=1
  fi
done
exit $status
