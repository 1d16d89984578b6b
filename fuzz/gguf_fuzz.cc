// libFuzzer target: GgufFile::Parse on arbitrary bytes. A parse that succeeds must describe a
// file whose every tensor lies inside the buffer: the target touches each tensor's first and
// last byte and walks all metadata, so ASan catches any validation gap.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gguf/gguf.h"
#include "gguf/summary.h"

namespace {

size_t Walk(const tachyon::gguf::Value& v) {
  size_t n = v.s.size() + v.ToString(4).size();
  for (const auto& e : v.arr) n += Walk(e);
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = tachyon::gguf::GgufFile::Parse(data, size, "fuzz.gguf");
  if (!f.ok()) {
    // Errors must name the input.
    if (f.status().message().rfind("fuzz.gguf: ", 0) != 0) __builtin_trap();
    return 0;
  }
  volatile size_t sink = 0;
  for (const auto& [key, value] : f->metadata()) {
    sink = sink + key.size() + Walk(value);
    if (f->Find(key) != &value) __builtin_trap();
  }
  for (const auto& t : f->tensors()) {
    if (t.nbytes == 0 || f->data_offset() + t.offset + t.nbytes > size) __builtin_trap();
    const uint8_t* p = f->TensorData(t);
    sink = sink + p[0] + p[t.nbytes - 1];
    if (f->FindTensor(t.name) != &t) __builtin_trap();
  }
  const auto tok = tachyon::gguf::SummarizeTokenizer(*f);
  const auto totals = tachyon::gguf::SummarizeTensors(*f);
  sink = sink + tok.special.size() + totals.tensors;
  (void)sink;
  return 0;
}
