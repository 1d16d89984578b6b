// DnsDiscovery (`tachyon route --dns NAME:PORT`): every A / AAAA record of NAME is a replica
// http://ADDRESS:PORT (IPv6 as http://[ADDRESS]:PORT), looked up again every interval — a
// Kubernetes headless Service names its ready pods this way. A failed lookup keeps the last
// set (PollingDiscovery).
//
// The resolver is a seam: the real one calls getaddrinfo; tests inject answers.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "router/discovery.h"
#include "util/status.h"

namespace tachyon::router {

// A name's addresses as numeric strings ("10.0.0.7", "::1"), or why the lookup failed.
using Resolver = std::function<Result<std::vector<std::string>>(const std::string& name)>;

// getaddrinfo (AF_UNSPEC, stream sockets). Thread-safe.
Resolver SystemResolver();

struct DnsTarget {
  std::string name;
  int port = 0;
};

// "NAME:PORT" (NAME a host name or address; [IPv6]:PORT). Errors: InvalidArgument naming
// what is wrong.
Result<DnsTarget> ParseDnsTarget(std::string_view text);

class DnsDiscovery : public PollingDiscovery {
 public:
  DnsDiscovery(DnsTarget target, std::chrono::milliseconds interval, Resolver resolver);
  ~DnsDiscovery() override;

 protected:
  Result<std::vector<DiscoveredReplica>> Lookup() override;

 private:
  const DnsTarget target_;
  const Resolver resolver_;
};

}  // namespace tachyon::router
