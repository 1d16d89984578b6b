// A compute thread pool: persistent workers and low-overhead fork/join.
//
//   ThreadPool pool(2);
//   pool.Run([&](int tid, int nthreads) { ... });          // every thread runs fn once
//   pool.ParallelFor(n, [&](int64_t begin, int64_t end) { ... });  // static split of [0, n)
//
// The calling thread takes part, so a pool of N threads starts N - 1 workers. The N parts
// of a Run are claimed dynamically: whichever thread is free takes the next part, so when
// the machine is oversubscribed and a worker is not scheduled, the caller runs its part
// instead of waiting for it. Idle threads spin briefly, then sleep on a futex
// (a futex), so back-to-back ops inside one model step cost about a microsecond
// each to dispatch and an idle pool costs no CPU.
// Thread-safety: Run/ParallelFor may be called from one thread at a time (the owner).
// Nested calls from inside a task run serially on the calling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
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

  // Runs fn(part, num_threads()) once for every part in [0, num_threads()) and waits for all.
  // Parts may run on any thread (several parts may run one after another on the same
  // thread), so fn must index per-part state by `part`, not by OS thread.
  void Run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into num_threads() contiguous ranges (aligned to `grain`) and runs
  // fn(begin, end) for each non-empty one.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

 private:
  void WorkerLoop();
  // Claims and runs parts of the current task until none are left.
  void RunParts();

  const int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic<const std::function<void(int, int)>*> task_{nullptr};
  std::atomic<uint32_t> generation_{0};   // bumped once per Run (futex word for workers)
  std::atomic<int> next_part_{0};         // next unclaimed part of the current task
  std::atomic<int> done_parts_{0};        // parts finished (futex word for the caller)
  std::atomic<int> sleepers_{0};          // workers blocked in generation_.wait
  std::atomic<bool> caller_waiting_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> in_run_{false};
};

// Number of hardware threads (at least 1).
int HardwareThreads();

}  // namespace tachyon
