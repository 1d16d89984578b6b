#include "kv/block_pool.h"

#include "util/logging.h"

namespace tachyon::kv {

BlockPool::BlockPool(int num_blocks) : blocks_(num_blocks > 0 ? num_blocks : 0) {
  for (int32_t i = 0; i < this->num_blocks(); ++i) PushFreeBack(i);
}

void BlockPool::PushFreeBack(int32_t id) {
  Block& b = blocks_[id];
  b.prev = free_tail_;
  b.next = -1;
  if (free_tail_ >= 0) {
    blocks_[free_tail_].next = id;
  } else {
    free_head_ = id;
  }
  free_tail_ = id;
  ++num_free_;
}

void BlockPool::RemoveFree(int32_t id) {
  Block& b = blocks_[id];
  if (b.prev >= 0) {
    blocks_[b.prev].next = b.next;
  } else {
    free_head_ = b.next;
  }
  if (b.next >= 0) {
    blocks_[b.next].prev = b.prev;
  } else {
    free_tail_ = b.prev;
  }
  b.prev = b.next = -1;
  --num_free_;
}

void BlockPool::DropHash(int32_t id) {
  Block& b = blocks_[id];
  if (!b.has_hash) return;
  cached_.erase(b.hash);
  b.has_hash = false;
  if (sink_ != nullptr && b.published) sink_->BlockRemoved(b.hash);
  b.published = false;
}

bool BlockPool::Allocate(int n, std::vector<int32_t>* out) {
  if (n < 0 || n > num_free_) return false;
  for (int i = 0; i < n; ++i) {
    const int32_t id = free_head_;
    RemoveFree(id);
    if (evict_hook_ != nullptr && blocks_[id].has_hash) evict_hook_->OnEvict(id, blocks_[id].hash);
    DropHash(id);
    blocks_[id].ref = 1;
    ++blocks_[id].allocations;
    out->push_back(id);
  }
  return true;
}

void BlockPool::Ref(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    Block& b = blocks_[id];
    if (b.ref == 0) RemoveFree(id);
    ++b.ref;
  }
}

void BlockPool::Unref(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    Block& b = blocks_[id];
    CHECK(b.ref > 0) << "block " << id << " freed twice";
    if (--b.ref == 0) PushFreeBack(id);
  }
}

std::optional<int32_t> BlockPool::Lookup(const BlockHash& hash) const {
  auto it = cached_.find(hash);
  if (it == cached_.end()) return std::nullopt;
  return it->second;
}

bool BlockPool::Cache(int32_t id, const BlockHash& hash, bool publish) {
  Block& b = blocks_[id];
  if (b.has_hash || cached_.count(hash)) return false;
  b.has_hash = true;
  b.hash = hash;
  b.published = publish;
  cached_.emplace(hash, id);
  if (sink_ != nullptr && publish) sink_->BlockStored(hash);
  return true;
}

void BlockPool::EvictAllFree() {
  for (int32_t id = free_head_; id >= 0; id = blocks_[id].next) DropHash(id);
}

}  // namespace tachyon::kv
