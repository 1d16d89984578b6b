#include "router/testing/router_testing.h"

#include <chrono>
#include <string>
#include <thread>

namespace tachyon::router {

std::vector<Endpoint> TestEndpoints(int n, int first_port) {
  std::vector<Endpoint> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(*ParseReplicaUrl("http://127.0.0.1:" + std::to_string(first_port + i)));
  }
  return out;
}

std::vector<kv::BlockHash> TestChain(int first, int n_blocks, std::string_view salt) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < 16 * n_blocks; ++i) tokens.push_back(first + i);
  std::vector<kv::BlockHash> hashes;
  kv::ExtendBlockHashes(tokens, 16, kv::RootHash(salt), tokens.size(), &hashes);
  return hashes;
}

void Finish(ReplicaPool& pool, const Placement& p) {
  pool.PrefillDone(p.replica, p.prefill_tokens);
  pool.Release(p.replica);
}

bool Eventually(const std::function<bool()>& pred) {
  for (int i = 0; i < 1000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

}  // namespace tachyon::router
