// A compute thread pool: persistent workers and low-overhead fork/join.
//
//   ThreadPool pool(2);
//   pool.Run([&](int tid, int nthreads) { ... });          // every thread runs fn once
//   pool.ParallelFor(n, [&](int64_t begin, int64_t end) { ... });  // static split of [0, n)
//
// The calling thread takes part as thread 0, so a pool of N threads starts N - 1 workers.
// Workers spin briefly for new work, then sleep on a condition variable, so back-to-back
// ops inside one model step cost well under a microsecond each to dispatch.
// Thread-safety: Run/ParallelFor may be called from one thread at a time (the owner).
// Nested calls from inside a task run serially on the calling thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tachyon {

class ThreadPool {
 public:
  // n_threads <= 0 means one per hardware thread.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return n_threads_; }

  // Runs fn(tid, n_threads) on every thread (tid 0 is the caller) and waits for all.
  void Run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into num_threads() contiguous ranges (aligned to `grain`) and runs
  // fn(begin, end) for each non-empty one.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

 private:
  void WorkerLoop(int tid);

  const int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* task_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> in_run_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
};

// Number of hardware threads (at least 1).
int HardwareThreads();

}  // namespace tachyon
