// Test helpers of router/: replica endpoints that need no server, prompt block hash chains, and a
// bounded wait for what a background thread does.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "kv/block_hash.h"
#include "router/replica_pool.h"
#include "router/upstream_client.h"

namespace tachyon::router {

// `n` endpoints http://127.0.0.1:first_port, :first_port + 1, ... (nothing listens there).
std::vector<Endpoint> TestEndpoints(int n, int first_port);

// The hash chain (kv/block_hash.h, rooted at `salt`) of `n_blocks` 16-token blocks whose tokens
// are first, first + 1, ...: chains whose token ranges overlap share leading blocks only where
// they start at the same token.
std::vector<kv::BlockHash> TestChain(int first, int n_blocks, std::string_view salt = "");

// The request placed as `p` ended with its answer complete, as a ProxyCall reports it: its prompt
// work is done (ReplicaPool::PrefillDone), then it leaves (Release).
void Finish(ReplicaPool& pool, const Placement& p);

// Polls `pred` every 20 ms until it returns true (then true) or for about 20 s (then pred()'s
// last answer): generous, so a loaded machine never fails a test that is only slow.
bool Eventually(const std::function<bool()>& pred);

}  // namespace tachyon::router
