// Status and Result<T>: the one error system of tachyon.
//
// Functions that can fail on input return Status (no value) or Result<T> (a value or an error).
// No exception crosses a module boundary; a dependency that throws is caught at the edge and
// turned into a Status. Codes map onto HTTP statuses (HttpStatus()).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tachyon {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad input from the caller: 400
  kNotFound,           // 404
  kUnauthenticated,    // 401
  kResourceExhausted,  // out of a resource (queue, memory): 429
  kUnavailable,        // try again later: 503
  kPayloadTooLarge,    // 413
  kUnimplemented,      // a feature (architecture, tensor type) not supported: 501 / 400
  kDataLoss,           // corrupt or truncated file
  kInternal,           // a broken invariant: 500
  kCancelled,          // aborted by the caller
  kDeadlineExceeded,   // 504
};

std::string_view StatusCodeName(StatusCode code);
// The HTTP status that reports this code to a client.
int HttpStatus(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message" (or "OK").
  std::string ToString() const;

  // Returns a copy with `prefix + ": "` in front of the message (adds context on the way up).
  Status WithContext(std::string_view prefix) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status PayloadTooLarge(std::string m) { return {StatusCode::kPayloadTooLarge, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }

// Result<T>: either a T or a non-OK Status. Like std::expected<T, Status>.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Result built from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  // REQUIRES: !ok()
  const Status& status() const& {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  Status status() && { return ok() ? Status() : std::move(std::get<Status>(v_)); }

  // REQUIRES: ok()
  T& value() & { return Get(); }
  const T& value() const& { return const_cast<Result*>(this)->Get(); }
  T&& value() && { return std::move(Get()); }
  T& operator*() & { return Get(); }
  const T& operator*() const& { return const_cast<Result*>(this)->Get(); }
  T* operator->() { return &Get(); }
  const T* operator->() const { return &const_cast<Result*>(this)->Get(); }

 private:
  T& Get() {
    if (!ok()) {
      std::fprintf(stderr, "FATAL: Result::value() on error: %s\n",
                   std::get<Status>(v_).ToString().c_str());
      std::abort();
    }
    return std::get<T>(v_);
  }
  std::variant<T, Status> v_;
};

}  // namespace tachyon

#define TACHYON_CONCAT_INNER(a, b) a##b
#define TACHYON_CONCAT(a, b) TACHYON_CONCAT_INNER(a, b)

// RETURN_IF_ERROR(expr): expr is a Status; returns it from the enclosing function if not OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::tachyon::Status _st = (expr);                  \
    if (!_st.ok()) return _st;                       \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): expr is a Result<T>; on error returns its status, else
// assigns (or declares, e.g. `auto x`) lhs from the value.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(TACHYON_CONCAT(_res_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return std::move(tmp).status(); \
  lhs = std::move(tmp).value()
