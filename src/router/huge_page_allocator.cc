#include "router/huge_page_allocator.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace tachyon::router {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t RoundUp(size_t bytes) {
  return (bytes + kHugePage - 1) & ~(kHugePage - 1);
}

}  // namespace

void* AllocateHugePageBacked(size_t bytes) {
  if (bytes < kHugePage) return ::operator new(bytes);
  const size_t size = RoundUp(bytes);
  // Map one huge page more than needed, then unmap the unaligned head and the tail.
  void* raw =
      mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + size + kHugePage;
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, size, MADV_HUGEPAGE);  // advice only: without THP the pages are small
  return p;
}

void FreeHugePageBacked(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes < kHugePage) {
    ::operator delete(p);
    return;
  }
  munmap(p, RoundUp(bytes));
}

}  // namespace tachyon::router
