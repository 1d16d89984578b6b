#include "util/status.h"

namespace tachyon {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kPayloadTooLarge: return "PAYLOAD_TOO_LARGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
  }
  return "UNKNOWN";
}

int HttpStatus(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kPayloadTooLarge: return 413;
    case StatusCode::kUnimplemented: return 400;
    case StatusCode::kDataLoss: return 400;
    case StatusCode::kInternal: return 500;
    case StatusCode::kCancelled: return 499;
    case StatusCode::kDeadlineExceeded: return 504;
  }
  return 500;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(StatusCodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::WithContext(std::string_view prefix) const {
  if (ok()) return *this;
  std::string m(prefix);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

}  // namespace tachyon
