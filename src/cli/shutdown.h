// What the long-running commands (serve, route) share to stop cleanly on SIGINT / SIGTERM.
//
//   TerminationSignals signals;   // first thing in the command: blocks SIGINT and SIGTERM
//   ... start threads (they inherit the blocked mask, so only Wait() receives the signal) ...
//   const char* name = signals.Wait();          // "SIGTERM" or "SIGINT"
//   WaitUntil([&] { return in_flight() == 0; }, grace_s);   // drain, bounded
#pragma once

#include <signal.h>

#include <functional>

namespace tachyon::cli {

class TerminationSignals {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread and in every thread it creates afterwards.
  TerminationSignals();
  TerminationSignals(const TerminationSignals&) = delete;
  TerminationSignals& operator=(const TerminationSignals&) = delete;

  // Returns once one of them arrives: its name.
  const char* Wait();

 private:
  sigset_t set_;
};

// Polls `done` every 20 ms until it holds (true) or `seconds` have passed (false).
bool WaitUntil(const std::function<bool()>& done, double seconds);

}  // namespace tachyon::cli
