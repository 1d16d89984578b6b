#include "server/sse.h"

#include "server/protocol.h"

namespace tachyon::server {

std::string SseData(const nlohmann::json& event) {
  std::string out = "data: ";
  out += DumpJson(event);
  out += "\n\n";
  return out;
}

std::string SseEvent(std::string_view name, const nlohmann::json& data) {
  std::string out = "event: ";
  out += name;
  out += "\ndata: ";
  out += DumpJson(data);
  out += "\n\n";
  return out;
}

}  // namespace tachyon::server
