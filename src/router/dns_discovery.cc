#include "router/dns_discovery.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cctype>
#include <charconv>

namespace tachyon::router {

Resolver SystemResolver() {
  return [](const std::string& name) -> Result<std::vector<std::string>> {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &list);
    if (rc != 0) {
      return Unavailable("resolving '" + name + "': " + gai_strerror(rc));
    }
    std::vector<std::string> out;
    for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
      char buf[INET6_ADDRSTRLEN] = {};
      const void* addr = nullptr;
      if (a->ai_family == AF_INET) {
        addr = &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr;
      } else if (a->ai_family == AF_INET6) {
        addr = &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
      } else {
        continue;
      }
      if (inet_ntop(a->ai_family, addr, buf, sizeof(buf)) != nullptr) out.emplace_back(buf);
    }
    freeaddrinfo(list);
    return out;
  };
}

Result<DnsTarget> ParseDnsTarget(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgument(quoted + " is not NAME:PORT");
  }
  std::string_view name = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  DnsTarget t;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), t.port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || t.port < 1 ||
      t.port > 65535) {
    return InvalidArgument(quoted + ": port '" + std::string(port_text) + "' is not in [1, 65535]");
  }
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  if (name.empty() || name.size() > 253) return InvalidArgument(quoted + ": no name");
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':' &&
        c != '_') {
      return InvalidArgument(quoted + ": '" + std::string(name) + "' is not a host name");
    }
  }
  t.name = std::string(name);
  return t;
}

DnsDiscovery::DnsDiscovery(DnsTarget target, std::chrono::milliseconds interval, Resolver resolver)
    : PollingDiscovery("dns", interval),
      target_(std::move(target)),
      resolver_(std::move(resolver)) {}

DnsDiscovery::~DnsDiscovery() {
  Stop();
}

Result<std::vector<DiscoveredReplica>> DnsDiscovery::Lookup() {
  ASSIGN_OR_RETURN(std::vector<std::string> addresses, resolver_(target_.name));
  if (addresses.empty()) return Unavailable("'" + target_.name + "' has no address");
  std::vector<DiscoveredReplica> out;
  for (const std::string& a : addresses) {
    const bool v6 = a.find(':') != std::string::npos;
    const std::string url =
        "http://" + (v6 ? "[" + a + "]" : a) + ":" + std::to_string(target_.port);
    Result<Endpoint> e = ParseReplicaUrl(url);
    if (!e.ok()) return Unavailable("resolving '" + target_.name + "': " + e.status().message());
    out.push_back(DiscoveredReplica{std::move(e).value(), {}});
  }
  return out;
}

}  // namespace tachyon::router
