#include "util/thread_pool.h"

#include <immintrin.h>

#include <algorithm>

namespace tachyon {
namespace {
constexpr int kSpinIterations = 20000;
}

int HardwareThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads <= 0 ? HardwareThreads() : n_threads) {
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::WorkerLoop(int tid) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen && i < kSpinIterations; ++i) {
      _mm_pause();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      cv_.wait(lock, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load()) return;
    (*task_)(tid, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::Run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1 || in_run_.exchange(true)) {
    // Single thread, or a nested call from inside a task: run everything here.
    fn(0, 1);
    return;
  }
  task_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1);  // seq_cst: pairs with sleepers_ below
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  fn(0, n_threads_);
  while (pending_.load(std::memory_order_acquire) != 0) _mm_pause();
  task_ = nullptr;
  in_run_.store(false);
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                             int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t chunks = (n + grain - 1) / grain;
  if (n_threads_ == 1 || chunks == 1) {
    fn(0, n);
    return;
  }
  Run([&](int tid, int nt) {
    const int64_t per = chunks / nt, rem = chunks % nt;
    const int64_t c0 = tid * per + std::min<int64_t>(tid, rem);
    const int64_t c1 = c0 + per + (tid < rem ? 1 : 0);
    const int64_t b = c0 * grain, e = std::min(n, c1 * grain);
    if (b < e) fn(b, e);
  });
}

}  // namespace tachyon
