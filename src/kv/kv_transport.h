// KV transport: the byte pipe a KV transfer (kv_wire.h) travels over, behind an interface so
// another transport (RDMA, e.g. UCX) can replace TCP without touching the senders/receivers.
//
// A connection carries frames one way and small answers (the Ack) the other. Every blocking
// call takes a deadline: a call that cannot finish by then returns DeadlineExceeded and leaves
// the connection unusable (the caller closes it), so a stalled peer never holds a thread longer
// than the bound the caller derived (StallDeadline: a floor plus the payload at a minimum rate).
// Errors: Unavailable for a refused, reset or closed connection, InvalidArgument for a bad
// address, DeadlineExceeded for a stall, Cancelled after Close().
//
// TCP (NewTcpTransport): non-blocking sockets with poll() up to the deadline, TCP_NODELAY,
// gather writes (sendmsg with the frames' spans: bodies borrowed from the caller's memory are
// written without a copy), MSG_NOSIGNAL. Addresses are "HOST:PORT" ("[v6]:PORT" for IPv6);
// Listen on port 0 picks a free port (address() says which).
// Thread-safety: a connection may be used by one sender and one receiver thread at once;
// Close() may be called from any thread and wakes both. A listener's Accept runs on one thread;
// its Close() from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kv/kv_wire.h"
#include "util/status.h"

namespace tachyon::kv {

using KvDeadline = std::chrono::steady_clock::time_point;

// The deadline for moving `bytes`: now + floor + bytes / min_bytes_per_second.
struct StallBound {
  double floor_seconds = 2.0;
  double min_bytes_per_second = 64e6;
  KvDeadline For(uint64_t bytes, KvDeadline now = std::chrono::steady_clock::now()) const;
};

class KvConnection {
 public:
  virtual ~KvConnection() = default;
  // Writes every frame, in order, entirely. Partial progress before an error is not undone.
  virtual Status Send(std::span<const KvWireFrame> frames, KvDeadline deadline) = 0;
  // Reads at least 1 and at most the spans' total bytes, filling the spans in order (one
  // scatter read); 0 means the peer closed its side (orderly end of stream).
  // REQUIRES: at least one span, none empty.
  virtual Result<size_t> ReceiveScatter(std::span<const std::span<uint8_t>> out,
                                        KvDeadline deadline) = 0;
  // ReceiveScatter into one span.
  Result<size_t> Receive(std::span<uint8_t> out, KvDeadline deadline) {
    return ReceiveScatter(std::span(&out, 1), deadline);
  }
  // Reads exactly out.size() bytes (DataLoss when the stream ends first).
  Status ReceiveExactly(std::span<uint8_t> out, KvDeadline deadline);
  // Ends the connection both ways; pending and later calls return Cancelled.
  virtual void Close() = 0;
  virtual std::string peer() const = 0;
};

class KvListener {
 public:
  virtual ~KvListener() = default;
  // The next incoming connection. DeadlineExceeded when none came by the deadline; Cancelled
  // after Close().
  virtual Result<std::unique_ptr<KvConnection>> Accept(KvDeadline deadline) = 0;
  virtual std::string address() const = 0;  // HOST:PORT actually bound
  virtual void Close() = 0;
};

class KvTransport {
 public:
  virtual ~KvTransport() = default;
  virtual Result<std::unique_ptr<KvConnection>> Connect(std::string_view address,
                                                        KvDeadline deadline) = 0;
  virtual Result<std::unique_ptr<KvListener>> Listen(std::string_view address) = 0;
  virtual std::string_view name() const = 0;
};

std::unique_ptr<KvTransport> NewTcpTransport();

// Splits "HOST:PORT" / "[V6]:PORT". Errors: InvalidArgument naming the address.
Status SplitHostPort(std::string_view address, std::string* host, uint16_t* port);

}  // namespace tachyon::kv
