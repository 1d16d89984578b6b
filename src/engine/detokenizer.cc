#include "engine/detokenizer.h"

namespace tachyon::engine {
namespace {
class FakeTextDecoder : public TextDecoder {
 public:
  explicit FakeTextDecoder(const std::vector<std::string>* pieces) : pieces_(pieces) {}
  std::string Push(int32_t id) override {
    if (id < 0 || static_cast<size_t>(id) >= pieces_->size()) return "";
    return (*pieces_)[id];
  }
  std::string Flush() override { return ""; }

 private:
  const std::vector<std::string>* pieces_;
};
}  // namespace

std::unique_ptr<TextDecoder> FakeDetokenizer::NewDecoder() const {
  return std::make_unique<FakeTextDecoder>(&pieces_);
}

}  // namespace tachyon::engine
