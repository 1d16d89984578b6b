#include "server/chat_mapping.h"

namespace tachyon::server {

using nlohmann::ordered_json;

const ordered_json* Field(const ordered_json& obj, const char* name) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

void CopyFields(const ordered_json& from, std::initializer_list<const char*> names,
                ordered_json& to) {
  for (const char* name : names) {
    if (const ordered_json* v = Field(from, name)) to[name] = *v;
  }
}

void RenameParam(ApiError& error, std::string_view from, std::string_view to) {
  const std::string& p = error.param;
  if (p.size() < from.size() || p.compare(0, from.size(), from) != 0) return;
  if (p.size() > from.size() && p[from.size()] != '[' && p[from.size()] != '.') return;
  const std::string old_param = p;
  const std::string renamed = std::string(to) + p.substr(from.size());
  for (size_t pos = error.message.find("'" + old_param); pos != std::string::npos;
       pos = error.message.find("'" + old_param, pos + renamed.size() + 1)) {
    error.message.replace(pos + 1, old_param.size(), renamed);
  }
  error.param = renamed;
}

ApiResult<std::string> TextContent(const ordered_json& content,
                                   std::initializer_list<std::string_view> text_types,
                                   const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return InvalidParam(param, "Invalid value for '" + param +
                                   "': expected a string or an array of content parts.");
  }
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const ordered_json& part = content[i];
    const std::string where = param + "[" + std::to_string(i) + "]";
    const ordered_json* type = Field(part, "type");
    if (type == nullptr || !type->is_string()) {
      return InvalidParam(where, "Invalid value for '" + where +
                                     "': expected an object with a "
                                     "'type'.");
    }
    const std::string& t = type->get_ref<const std::string&>();
    bool text = false;
    for (std::string_view tt : text_types) text = text || t == tt;
    if (!text) {
      return InvalidParam(
          where, "Content of type '" + t + "' is not supported by this server; only text is.");
    }
    const ordered_json* value = Field(part, "text");
    if (value == nullptr || !value->is_string()) {
      return InvalidParam(where, "Invalid value for '" + where +
                                     "': a text part needs a string "
                                     "'text'.");
    }
    if (!out.empty()) out += "\n";
    out += value->get<std::string>();
  }
  return out;
}

}  // namespace tachyon::server
