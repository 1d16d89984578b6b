// TestChannel: an in-memory ResponseChannel for unit tests. Posted tasks queue up and run in
// Pump() on the test thread (the "executor"); everything the handler answers is recorded.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "server/http.h"

namespace tachyon::server {

class TestChannel : public ResponseChannel {
 public:
  void Respond(HttpResponse r) override {
    std::lock_guard<std::mutex> l(mu_);
    if (done_) return;
    response = std::move(r);
    done_ = true;
  }
  void StartStream(Headers) override {
    std::lock_guard<std::mutex> l(mu_);
    streaming = true;
  }
  bool Write(std::string data) override {
    std::lock_guard<std::mutex> l(mu_);
    if (gone_) return false;
    stream += data;
    return true;
  }
  void EndStream() override {
    std::lock_guard<std::mutex> l(mu_);
    done_ = true;
  }
  void Post(std::function<void()> fn) override {
    std::lock_guard<std::mutex> l(mu_);
    tasks_.push_back(std::move(fn));
    cv_.notify_all();
  }
  void SetOnClose(std::function<void()> fn) override { on_close_ = std::move(fn); }

  // Runs posted tasks until the answer is complete; false on timeout.
  bool Pump(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock<std::mutex> l(mu_);
    while (!done_) {
      if (tasks_.empty() && !cv_.wait_until(l, deadline, [&] { return !tasks_.empty(); })) {
        return false;
      }
      RunTasks(l);
    }
    return true;
  }
  // Runs what is queued now (and what arrives within `wait`).
  void PumpFor(std::chrono::milliseconds wait) {
    auto deadline = std::chrono::steady_clock::now() + wait;
    std::unique_lock<std::mutex> l(mu_);
    while (std::chrono::steady_clock::now() < deadline) {
      cv_.wait_until(l, deadline, [&] { return !tasks_.empty(); });
      RunTasks(l);
    }
  }
  // Simulates the client going away.
  void Disconnect() {
    {
      std::lock_guard<std::mutex> l(mu_);
      gone_ = true;
    }
    if (on_close_) on_close_();
  }
  bool done() {
    std::lock_guard<std::mutex> l(mu_);
    return done_;
  }
  nlohmann::json Json() const { return nlohmann::json::parse(response.body); }
  // The JSON payloads of the `data:` events (without [DONE]); `done` tells if [DONE] came.
  std::vector<nlohmann::json> Events(bool* saw_done = nullptr) const {
    std::vector<nlohmann::json> out;
    size_t pos = 0;
    if (saw_done) *saw_done = false;
    while ((pos = stream.find("data: ", pos)) != std::string::npos) {
      size_t end = stream.find("\n\n", pos);
      std::string payload = stream.substr(pos + 6, end - pos - 6);
      if (payload == "[DONE]") {
        if (saw_done) *saw_done = true;
      } else {
        out.push_back(nlohmann::json::parse(payload));
      }
      pos = end + 2;
    }
    return out;
  }

  HttpResponse response;
  bool streaming = false;
  std::string stream;

 private:
  void RunTasks(std::unique_lock<std::mutex>& l) {
    while (!tasks_.empty()) {
      auto fn = std::move(tasks_.front());
      tasks_.pop_front();
      l.unlock();
      fn();
      l.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::function<void()> on_close_;
  bool done_ = false;
  bool gone_ = false;
};

}  // namespace tachyon::server
