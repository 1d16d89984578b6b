// libFuzzer target: a Tokenizer built from a fuzzed GGUF vocabulary, then Encode / Decode /
// TokenBytes / the incremental detokenizer on fuzzed text. A vocabulary the loader accepts must
// never make any of them crash, throw or read out of bounds.
//
// Input: either a whole GGUF file (it starts with "GGUF"), or a compact description that the
// target turns into one (so that most inputs reach the tokenizer, not the GGUF parser):
//   byte 0      model: llama / gpt2 / bert (mod 3); bits 2..7 pick bos/eos ids and flags
//   then lines  up to a "\x00" line: vocabulary entries; a line's first byte (mod 7) is its
//               token type (0 = undefined .. 6 = byte), the rest its spelling. For gpt2,
//               entries whose first byte is 'm' are merges "a b" instead.
//   the rest    the text to encode.
//
//   scripts/fuzz.sh 60 tokenizer_fuzz
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

using tachyon::gguf::GgufFile;
using tachyon::gguf::GgufWriter;
using tachyon::gguf::Value;
using tachyon::tokenizer::IncrementalDetokenizer;
using tachyon::tokenizer::TextSegment;
using tachyon::tokenizer::Tokenizer;

// Builds GGUF bytes from the compact description; returns the text to encode.
std::string_view Describe(std::string_view in, std::string* gguf) {
  const uint8_t head = static_cast<uint8_t>(in[0]);
  in.remove_prefix(1);
  static const char* kModels[] = {"llama", "gpt2", "bert"};
  const std::string model = kModels[head % 3];
  std::vector<std::string> tokens, merges;
  std::vector<int32_t> types;
  std::vector<float> scores;
  while (!in.empty()) {
    size_t nl = in.find('\n');
    std::string_view line = in.substr(0, nl);
    in.remove_prefix(nl == std::string_view::npos ? in.size() : nl + 1);
    if (line == std::string_view("\0", 1)) break;
    if (line.empty()) continue;
    if (model == "gpt2" && line[0] == 'm') {
      merges.emplace_back(line.substr(1));
      continue;
    }
    types.push_back(static_cast<uint8_t>(line[0]) % 7);
    tokens.emplace_back(line.substr(1));
    scores.push_back(-static_cast<float>(tokens.size()));
  }
  GgufWriter w;
  w.Set("tokenizer.ggml.model", Value::String(model));
  w.Set("tokenizer.ggml.tokens", Value::StringArray(tokens));
  w.Set("tokenizer.ggml.token_type", Value::Int32Array(types));
  w.Set("tokenizer.ggml.scores", Value::Float32Array(scores));
  if (model == "gpt2") w.Set("tokenizer.ggml.merges", Value::StringArray(merges));
  const uint32_t n = static_cast<uint32_t>(tokens.size());
  if (n > 0) {
    w.Set("tokenizer.ggml.bos_token_id", Value::Uint32((head >> 2) % (n + 1)));
    w.Set("tokenizer.ggml.eos_token_id", Value::Uint32((head >> 4) % (n + 1)));
  }
  w.Set("tokenizer.ggml.add_bos_token", Value::Bool(head & 0x40));
  w.Set("tokenizer.ggml.add_space_prefix", Value::Bool(head & 0x80));
  *gguf = w.Serialize();
  return in;
}

void Exercise(const Tokenizer& tok, std::string_view text) {
  volatile size_t sink = 0;
  for (bool specials : {false, true}) {
    std::vector<int32_t> ids = tok.Encode(text, /*add_special=*/specials, specials);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok.vocab_size()) __builtin_trap();  // Encode must return real ids
    }
    sink = sink + tok.Decode(ids, specials).size();
    IncrementalDetokenizer detok(tok, /*skip_special=*/specials);
    for (int32_t id : ids) sink = sink + detok.Push(id).size();
    sink = sink + detok.Flush().size();
  }
  // Segments: cut the text in three at code-point starts taken from its length (segments
  // come from whole client strings, never from inside a UTF-8 sequence); with every segment
  // trusted the ids are those of one Encode, and untrusted segments give valid ids too.
  auto code_point_start = [&](size_t i) {
    while (i > 0 && i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
    return i;
  };
  const size_t a = code_point_start(text.size() / 3);
  const size_t b = std::max(a, code_point_start(text.size() - text.size() / 4));
  const TextSegment trusted[] = {{text.substr(0, a), true}, {text.substr(a, b - a), true},
                                 {text.substr(b), true}};
  if (tok.EncodeSegments(trusted, true) != tok.Encode(text, true, true)) __builtin_trap();
  const TextSegment mixed[] = {{text.substr(0, a), true}, {text.substr(a, b - a), false},
                               {text.substr(b), true}};
  for (int32_t id : tok.EncodeSegments(mixed, false)) {
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  }
  const int32_t n = tok.vocab_size();
  for (int32_t id = -1; id <= n && id < 4096; ++id) {
    sink = sink + tok.TokenBytes(id).size() + tok.TokenText(id).size();
    sink = sink + tok.IsSpecial(id);
  }
  // Out-of-range ids must be tolerated by every decode path.
  sink = sink + tok.Decode({-1, n, n + 1000}, false).size() + tok.TokenBytes(n + 7).size();
  (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (1u << 16)) return 0;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string bytes;
  std::string_view text = "Hello world! <s> \xE2\x96\x81x \xff\xfe caf\xC3\xA9 1234 \n\t";
  if (in.substr(0, 4) == "GGUF") {
    bytes.assign(in);
  } else {
    text = Describe(in, &bytes);
  }
  auto file =
      GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "fuzz.gguf");
  if (!file.ok()) return 0;
  auto tok = Tokenizer::FromGguf(*file);
  if (!tok.ok()) {
    if (tok.status().message().empty()) __builtin_trap();  // errors must say something
    return 0;
  }
  Exercise(**tok, text);
  return 0;
}
