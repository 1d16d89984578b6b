#include "engine/tokenizer_adapter.h"

namespace tachyon::engine {
namespace {
class StreamingDecoder : public TextDecoder {
 public:
  // Keeps the tokenizer alive for as long as the decoder refers to it.
  explicit StreamingDecoder(std::shared_ptr<const tokenizer::Tokenizer> t)
      : tokenizer_(std::move(t)), detok_(*tokenizer_, /*skip_special=*/true) {}
  std::string Push(int32_t id) override { return detok_.Push(id); }
  std::string Flush() override { return detok_.Flush(); }
  void SetContext(const std::vector<int32_t>& prompt) override { detok_.SetContext(prompt); }

 private:
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  tokenizer::IncrementalDetokenizer detok_;
};
}  // namespace

std::unique_ptr<TextDecoder> TokenizerDetokenizer::NewDecoder() const {
  return std::make_unique<StreamingDecoder>(tokenizer_);
}

}  // namespace tachyon::engine
