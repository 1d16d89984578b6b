#include "util/thread_pool.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

namespace tachyon {
namespace {

// Sleeps while *word == expected (returns at once otherwise, or spuriously).
template <typename T>
void FutexWait(std::atomic<T>* word, T expected) {
  static_assert(sizeof(T) == 4 && std::atomic<T>::is_always_lock_free);
  syscall(SYS_futex, reinterpret_cast<T*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

template <typename T>
void FutexWakeAll(std::atomic<T>* word) {
  syscall(SYS_futex, reinterpret_cast<T*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

// About 50-100 microseconds of spinning before a thread sleeps.
constexpr int kSpinIterations = 2000;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

int HardwareThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads <= 0 ? HardwareThreads() : n_threads) {
  next_part_.store(n_threads_);  // nothing to claim until the first Run
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  FutexWakeAll(&generation_);
  for (auto& w : workers_) w.join();
}

int ThreadPool::RunParts(bool worker) {
  const bool timed = worker && stats_on_.load(std::memory_order_relaxed);
  for (int ran = 0;; ++ran) {
    const int part = next_part_.fetch_add(1);
    if (part >= n_threads_) return ran;
    // A successful claim happens after Run published task_ (it stores task_ before it
    // resets next_part_), so this is the task the part belongs to.
    int64_t t0 = 0;
    if (timed) {
      t0 = NowNs();
      if (ran == 0) {
        worker_start_ns_.fetch_add(t0 - run_start_ns_.load(), std::memory_order_relaxed);
        worker_runs_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    (*task_.load())(part, n_threads_);
    if (timed) {
      worker_work_ns_.fetch_add(NowNs() - t0, std::memory_order_relaxed);
    }
    // The stats above are published by this increment (seq_cst), which the caller awaits.
    if (done_parts_.fetch_add(1) + 1 == n_threads_ && caller_waiting_.load()) {
      FutexWakeAll(&done_parts_);
    }
  }
}

void ThreadPool::ResetStats() {
  caller_stats_ = Stats();
  worker_work_ns_.store(0);
  worker_start_ns_.store(0);
  worker_runs_.store(0);
}

ThreadPool::Stats ThreadPool::stats() const {
  Stats s = caller_stats_;
  s.worker_work_s = 1e-9 * static_cast<double>(worker_work_ns_.load());
  s.worker_start_s = 1e-9 * static_cast<double>(worker_start_ns_.load());
  s.worker_runs = worker_runs_.load();
  return s;
}

void ThreadPool::WorkerLoop() {
  uint32_t seen = generation_.load();
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen && i < kSpinIterations; ++i) {
      _mm_pause();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      sleepers_.fetch_add(1);
      // stop_ is set before the destructor's generation bump, so a worker that starts late
      // (and so never sees a change) still notices it.
      while ((gen = generation_.load()) == seen && !stop_.load()) FutexWait(&generation_, seen);
      sleepers_.fetch_sub(1);
    }
    seen = gen;
    if (stop_.load()) return;
    RunParts(/*worker=*/true);
  }
}

void ThreadPool::Run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1 || in_run_.exchange(true)) {
    // Single thread, or a nested call from inside a task: run everything here.
    fn(0, 1);
    return;
  }
  const bool timed = stats_on_.load(std::memory_order_relaxed);
  int64_t t0 = 0, t1 = 0;
  if (timed) {
    t0 = NowNs();
    run_start_ns_.store(t0, std::memory_order_relaxed);
  }
  task_.store(&fn);
  done_parts_.store(0);
  next_part_.store(0);
  generation_.fetch_add(1);  // seq_cst: pairs with the worker's sleepers_ increment
  if (sleepers_.load() > 0) FutexWakeAll(&generation_);
  RunParts(/*worker=*/false);
  if (timed) t1 = NowNs();
  int done = done_parts_.load();
  for (int i = 0; done != n_threads_ && i < kSpinIterations; ++i) {
    _mm_pause();
    done = done_parts_.load();
  }
  if (done != n_threads_) {
    caller_waiting_.store(true);
    while ((done = done_parts_.load()) != n_threads_) FutexWait(&done_parts_, done);
    caller_waiting_.store(false);
  }
  if (timed) {
    const int64_t t2 = NowNs();
    caller_stats_.runs += 1;
    caller_stats_.run_s += 1e-9 * static_cast<double>(t2 - t0);
    caller_stats_.caller_work_s += 1e-9 * static_cast<double>(t1 - t0);
    caller_stats_.join_wait_s += 1e-9 * static_cast<double>(t2 - t1);
  }
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
