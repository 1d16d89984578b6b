#include "util/logging.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

namespace tachyon {
namespace {

LogLevel InitialLevel() {
  const char* env = std::getenv("TACHYON_LOG");
  LogLevel level = LogLevel::kInfo;
  if (env != nullptr) ParseLogLevel(env, &level);
  return level;
}

std::atomic<int>& LevelVar() {
  static std::atomic<int> level(static_cast<int>(InitialLevel()));
  return level;
}

const char* LevelTag(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "D";
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarn: return "W";
    case LogLevel::kError: return "E";
    case LogLevel::kFatal: return "F";
  }
  return "?";
}

}  // namespace

void SetLogLevel(LogLevel level) { LevelVar().store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(LevelVar().load(std::memory_order_relaxed)); }

bool ParseLogLevel(const std::string& s, LogLevel* out) {
  if (s == "debug") *out = LogLevel::kDebug;
  else if (s == "info") *out = LogLevel::kInfo;
  else if (s == "warn" || s == "warning") *out = LogLevel::kWarn;
  else if (s == "error") *out = LogLevel::kError;
  else return false;
  return true;
}

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const auto t = system_clock::to_time_t(now);
  const auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  struct tm tmv;
  gmtime_r(&t, &tmv);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03d", tmv.tm_hour, tmv.tm_min, tmv.tm_sec,
                static_cast<int>(ms));
  const char* base = std::strrchr(file, '/');
  ss_ << LevelTag(level) << " " << buf << " " << (base ? base + 1 : file) << ":" << line << "] ";
}

LogMessage::~LogMessage() {
  ss_ << '\n';
  const std::string s = ss_.str();
  ssize_t unused = ::write(2, s.data(), s.size());
  (void)unused;
  if (level_ == LogLevel::kFatal) std::abort();
}

void RunLoggingExceptions(const char* what, const std::function<void()>& run) {
  for (;;) {
    try {
      run();
      return;
    } catch (const std::exception& e) {
      TLOG(ERROR) << what << ": uncaught exception: " << e.what();
    } catch (...) {
      TLOG(ERROR) << what << ": uncaught non-standard exception";
    }
  }
}

}  // namespace tachyon
