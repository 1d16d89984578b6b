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

  // Where the time of the parallel passes goes (`tachyon profile`), summed over every Run of
  // more than one thread since the last ResetStats. Off by default (then Run reads no clock);
  // SetStatsEnabled and ResetStats must not overlap a Run, stats() only after one returned.
  struct Stats {
    int64_t runs = 0;
    double run_s = 0;          // wall time inside Run
    double caller_work_s = 0;  // the calling thread running parts
    double join_wait_s = 0;    // the calling thread waiting for other threads' parts
    double worker_work_s = 0;  // workers running parts (all workers together)
    double worker_start_s = 0;  // from Run's start to each worker's first part (summed)
    int64_t worker_runs = 0;   // Runs in which some worker ran a part
  };
  void SetStatsEnabled(bool on) { stats_on_.store(on, std::memory_order_relaxed); }
  void ResetStats();
  Stats stats() const;

 private:
  void WorkerLoop();
  // Claims and runs parts of the current task until none are left; returns how many it ran.
  // `worker`: called by a worker thread (timed into the worker stats when they are on).
  int RunParts(bool worker);

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
  // Stats (written only while stats_on_; times in steady_clock nanoseconds).
  std::atomic<bool> stats_on_{false};
  std::atomic<int64_t> run_start_ns_{0};  // the current Run's start
  std::atomic<int64_t> worker_work_ns_{0}, worker_start_ns_{0}, worker_runs_{0};
  Stats caller_stats_;  // the caller's fields (runs, run_s, caller_work_s, join_wait_s)
};

// Number of hardware threads (at least 1).
int HardwareThreads();

}  // namespace tachyon
