// Logging to stderr with levels, and CHECK for broken invariants.
//
//   TLOG(INFO) << "loaded " << n << " tensors";
//   CHECK(n > 0) << "context";
// The level is set once from the TACHYON_LOG env var (debug|info|warn|error) or SetLogLevel().
// Thread-safe: each message is written with one call.
#pragma once

#include <functional>
#include <sstream>
#include <string>

namespace tachyon {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kFatal = 4 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
bool ParseLogLevel(const std::string& s, LogLevel* out);

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();  // writes the line; aborts for kFatal
  std::ostream& stream() { return ss_; }

 private:
  LogLevel level_;
  std::ostringstream ss_;
};

// Swallows the stream when the level is disabled.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

// Calls `run` until it returns normally: an exception escaping it is logged as an error (with
// `what`) and `run` is called again. For an event loop's thread (an io_context's run()), where a
// handler that throws must end neither the thread nor, uncaught, the process.
void RunLoggingExceptions(const char* what, const std::function<void()>& run);

}  // namespace tachyon

#define TACHYON_LOG_DEBUG ::tachyon::LogLevel::kDebug
#define TACHYON_LOG_INFO ::tachyon::LogLevel::kInfo
#define TACHYON_LOG_WARN ::tachyon::LogLevel::kWarn
#define TACHYON_LOG_ERROR ::tachyon::LogLevel::kError
#define TACHYON_LOG_FATAL ::tachyon::LogLevel::kFatal

#define TLOG(level)                                                 \
  (TACHYON_LOG_##level < ::tachyon::GetLogLevel())                  \
      ? (void)0                                                     \
      : ::tachyon::LogVoidify() &                                   \
            ::tachyon::LogMessage(TACHYON_LOG_##level, __FILE__, __LINE__).stream()

#define CHECK(cond)                                                            \
  (cond) ? (void)0                                                             \
         : ::tachyon::LogVoidify() &                                           \
               ::tachyon::LogMessage(::tachyon::LogLevel::kFatal, __FILE__, __LINE__) \
                       .stream()                                               \
                   << "Check failed: " #cond " "
