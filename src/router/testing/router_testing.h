// Test helpers of router/: replica endpoints that need no server, and prompt block hash chains.
#pragma once

#include <string_view>
#include <vector>

#include "kv/block_hash.h"
#include "router/upstream_client.h"

namespace tachyon::router {

// `n` endpoints http://127.0.0.1:first_port, :first_port + 1, ... (nothing listens there).
std::vector<Endpoint> TestEndpoints(int n, int first_port);

// The hash chain (kv/block_hash.h, rooted at `salt`) of `n_blocks` 16-token blocks whose tokens
// are first, first + 1, ...: chains whose token ranges overlap share leading blocks only where
// they start at the same token.
std::vector<kv::BlockHash> TestChain(int first, int n_blocks, std::string_view salt = "");

}  // namespace tachyon::router
