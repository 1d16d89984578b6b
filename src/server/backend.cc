#include "server/backend.h"

namespace tachyon::server {

Result<std::vector<int32_t>> GenerationBackend::TokenizeChat(const nlohmann::ordered_json& context,
                                                             std::string_view suffix,
                                                             bool add_special) const {
  ASSIGN_OR_RETURN(std::string text, ApplyChatTemplate(context));
  text += suffix;
  return Tokenize(text, add_special);
}

Result<std::shared_ptr<const grammar::CompiledGrammar>> GenerationBackend::CompileConstraint(
    const grammar::ConstraintSpec&) const {
  return InvalidArgument("structured output is not available on this server's backend.");
}

Result<engine::PoolingRequest> GenerationBackend::TokenizeForPooling(
    std::string_view, const std::string_view*) const {
  return Unimplemented("this backend serves no pooling model");
}

Status GenerationBackend::SubmitPooling(engine::PoolingRequest, engine::PoolingCallback) {
  return Unimplemented("this backend serves no pooling model");
}

}  // namespace tachyon::server
