#include "kv/kv_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

namespace tachyon::kv {

KvDeadline StallBound::For(uint64_t bytes, KvDeadline now) const {
  const double s = floor_seconds + (min_bytes_per_second > 0 ? bytes / min_bytes_per_second : 0);
  return now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                   std::chrono::duration<double>(s));
}

Status KvConnection::ReceiveExactly(std::span<uint8_t> out, KvDeadline deadline) {
  size_t got = 0;
  while (got < out.size()) {
    Result<size_t> n = Receive(out.subspan(got), deadline);
    if (!n.ok()) return n.status();
    if (*n == 0) {
      return DataLoss("KV transfer: the connection ended after " + std::to_string(got) + " of " +
                      std::to_string(out.size()) + " bytes");
    }
    got += *n;
  }
  return OkStatus();
}

Status SplitHostPort(std::string_view a, std::string* host, uint16_t* port) {
  auto bad = [&] {
    return InvalidArgument("KV address '" + std::string(a) + "' is not HOST:PORT");
  };
  size_t colon;
  if (!a.empty() && a.front() == '[') {
    const size_t close = a.find(']');
    if (close == std::string_view::npos || close + 1 >= a.size() || a[close + 1] != ':') {
      return bad();
    }
    *host = std::string(a.substr(1, close - 1));
    colon = close + 1;
  } else {
    colon = a.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return bad();
    *host = std::string(a.substr(0, colon));
    if (host->find(':') != std::string::npos) return bad();
  }
  const std::string_view p = a.substr(colon + 1);
  if (p.empty() || p.size() > 5) return bad();
  uint32_t v = 0;
  for (char c : p) {
    if (c < '0' || c > '9') return bad();
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v > 65535 || host->empty()) return bad();
  *port = static_cast<uint16_t>(v);
  return OkStatus();
}

namespace {

int MillisLeft(KvDeadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30));
}

std::string Errno(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

std::string AddressOf(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
  inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
  return std::string(buf) + ":" + std::to_string(ntohs(a->sin_port));
}

bool SetNonBlocking(int fd) {
  const int fl = fcntl(fd, F_GETFL, 0);
  return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

// Waits until fd is ready for `events` or the wake fd fires. Ok: ready; Cancelled: woken;
// DeadlineExceeded: the deadline passed.
Status WaitFor(int fd, short events, int wake_fd, KvDeadline deadline, const char* what) {
  for (;;) {
    pollfd p[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    const int ms = MillisLeft(deadline);
    if (ms == 0)
      return {StatusCode::kDeadlineExceeded,
              std::string("KV transfer: ") + what + " stalled past its deadline"};
    const int r = poll(p, 2, ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Internal(Errno("poll"));
    }
    if (p[1].revents) return Cancelled("KV transfer: connection closed locally");
    if (p[0].revents) return OkStatus();
  }
}

class TcpConnection final : public KvConnection {
  static constexpr size_t kMaxScatter = 256;  // spans per read (IOV_MAX is 1024)

 public:
  TcpConnection(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {
    wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  ~TcpConnection() override {
    close(fd_);
    if (wake_ >= 0) close(wake_);
  }

  Status Send(std::span<const KvWireFrame> frames, KvDeadline deadline) override {
    std::vector<iovec> iov;
    for (const KvWireFrame& f : frames) {
      iov.push_back({const_cast<uint8_t*>(f.head.data()), f.head.size()});
      for (const auto& b : f.body) {
        if (!b.empty()) iov.push_back({const_cast<uint8_t*>(b.data()), b.size()});
      }
      iov.push_back({const_cast<uint8_t*>(f.trailer.data()), f.trailer.size()});
    }
    size_t first = 0;
    while (first < iov.size()) {
      if (closed_.load()) return Cancelled("KV transfer: connection closed locally");
      msghdr m{};
      m.msg_iov = iov.data() + first;
      m.msg_iovlen = std::min<size_t>(iov.size() - first, IOV_MAX);
      const ssize_t n = sendmsg(fd_, &m, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          RETURN_IF_ERROR(WaitFor(fd_, POLLOUT, wake_, deadline, "send"));
          continue;
        }
        if (closed_.load()) return Cancelled("KV transfer: connection closed locally");
        return Unavailable("KV transfer: send to " + peer_ + ": " + std::strerror(errno));
      }
      size_t left = static_cast<size_t>(n);
      while (left > 0 && first < iov.size()) {
        if (left >= iov[first].iov_len) {
          left -= iov[first].iov_len;
          ++first;
        } else {
          iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + left;
          iov[first].iov_len -= left;
          left = 0;
        }
      }
    }
    return OkStatus();
  }

  Result<size_t> ReceiveScatter(std::span<const std::span<uint8_t>> out,
                                KvDeadline deadline) override {
    iovec iov[kMaxScatter];
    const size_t count = std::min(out.size(), kMaxScatter);
    for (size_t i = 0; i < count; ++i) iov[i] = {out[i].data(), out[i].size()};
    for (;;) {
      if (closed_.load()) return Cancelled("KV transfer: connection closed locally");
      const ssize_t n = readv(fd_, iov, static_cast<int>(count));
      if (n > 0) return static_cast<size_t>(n);
      if (closed_.load()) return Cancelled("KV transfer: connection closed locally");
      if (n == 0) return size_t{0};
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        RETURN_IF_ERROR(WaitFor(fd_, POLLIN, wake_, deadline, "receive"));
        continue;
      }
      return Unavailable("KV transfer: receive from " + peer_ + ": " + std::strerror(errno));
    }
  }

  void Close() override {
    if (closed_.exchange(true)) return;
    shutdown(fd_, SHUT_RDWR);
    const uint64_t one = 1;
    if (wake_ >= 0) (void)!write(wake_, &one, sizeof(one));
  }

  std::string peer() const override { return peer_; }

 private:
  int fd_;
  int wake_ = -1;
  std::string peer_;
  std::atomic<bool> closed_{false};
};

class TcpListener final : public KvListener {
 public:
  TcpListener(int fd, std::string address) : fd_(fd), address_(std::move(address)) {
    wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  ~TcpListener() override {
    close(fd_);
    if (wake_ >= 0) close(wake_);
  }

  Result<std::unique_ptr<KvConnection>> Accept(KvDeadline deadline) override {
    for (;;) {
      if (closed_.load()) return Cancelled("KV listener closed");
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      const int c =
          accept4(fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (c >= 0) {
        const int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return std::unique_ptr<KvConnection>(new TcpConnection(c, AddressOf(ss)));
      }
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        Status s = WaitFor(fd_, POLLIN, wake_, deadline, "accept");
        if (!s.ok()) return s;
        continue;
      }
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        return ResourceExhausted(Errno("KV listener accept"));
      }
      return Internal(Errno("KV listener accept"));
    }
  }

  std::string address() const override { return address_; }

  void Close() override {
    if (closed_.exchange(true)) return;
    const uint64_t one = 1;
    if (wake_ >= 0) (void)!write(wake_, &one, sizeof(one));
  }

 private:
  int fd_;
  int wake_ = -1;
  std::string address_;
  std::atomic<bool> closed_{false};
};

Result<addrinfo*> Resolve(std::string_view address, bool passive) {
  std::string host;
  uint16_t port = 0;
  RETURN_IF_ERROR(SplitHostPort(address, &host, &port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return InvalidArgument("KV address '" + std::string(address) + "': " + gai_strerror(rc));
  }
  return res;
}

class TcpTransport final : public KvTransport {
 public:
  Result<std::unique_ptr<KvConnection>> Connect(std::string_view address,
                                                KvDeadline deadline) override {
    Result<addrinfo*> res = Resolve(address, false);
    if (!res.ok()) return res.status();
    Status last = Unavailable("KV transfer: no address for " + std::string(address));
    for (addrinfo* ai = *res; ai != nullptr; ai = ai->ai_next) {
      const int fd =
          socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) {
        last = ResourceExhausted(Errno("socket"));
        continue;
      }
      int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
      if (rc < 0 && errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int ms;
        do {
          ms = MillisLeft(deadline);
          rc = ms > 0 ? poll(&p, 1, ms) : 0;
        } while (rc < 0 && errno == EINTR);
        if (rc == 0) {
          close(fd);
          freeaddrinfo(*res);
          return Status(StatusCode::kDeadlineExceeded,
                        "KV transfer: connect to " + std::string(address) + " timed out");
        }
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        errno = err;
        rc = err == 0 ? 0 : -1;
      }
      if (rc < 0) {
        last = Unavailable("KV transfer: connect to " + std::string(address) + ": " +
                           std::strerror(errno));
        close(fd);
        continue;
      }
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      freeaddrinfo(*res);
      return std::unique_ptr<KvConnection>(new TcpConnection(fd, std::string(address)));
    }
    freeaddrinfo(*res);
    return last;
  }

  Result<std::unique_ptr<KvListener>> Listen(std::string_view address) override {
    Result<addrinfo*> res = Resolve(address, true);
    if (!res.ok()) return res.status();
    Status last = Unavailable("KV listener: no address for " + std::string(address));
    for (addrinfo* ai = *res; ai != nullptr; ai = ai->ai_next) {
      const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) continue;
      const int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0 ||
          !SetNonBlocking(fd)) {
        last = Unavailable("KV listener on " + std::string(address) + ": " + std::strerror(errno));
        close(fd);
        continue;
      }
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
      freeaddrinfo(*res);
      return std::unique_ptr<KvListener>(new TcpListener(fd, AddressOf(ss)));
    }
    freeaddrinfo(*res);
    return last;
  }

  std::string_view name() const override { return "tcp"; }
};

}  // namespace

std::unique_ptr<KvTransport> NewTcpTransport() {
  return std::make_unique<TcpTransport>();
}

}  // namespace tachyon::kv
