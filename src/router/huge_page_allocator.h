// HugePageAllocator: a std::allocator-compatible allocator whose large blocks (>= 2 MiB) are
// anonymous mappings aligned to 2 MiB and marked MADV_HUGEPAGE, so that a table read at random
// (the prefix index: tens of MB) costs few TLB misses where the kernel has transparent huge
// pages in `madvise` mode. Smaller blocks come from operator new. The mapping's pages are
// zero until written. Allocation failure throws std::bad_alloc, as std::allocator does.
//
// Thread-safety: stateless; any thread.
#pragma once

#include <cstddef>

namespace tachyon::router {

void* AllocateHugePageBacked(size_t bytes);
void FreeHugePageBacked(void* p, size_t bytes);

template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding is implicit
  T* allocate(size_t n) { return static_cast<T*>(AllocateHugePageBacked(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { FreeHugePageBacked(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

}  // namespace tachyon::router
