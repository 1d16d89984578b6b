// ResponseStore: the bounded in-memory store behind the Responses API's previous_response_id.
//
// Each stored response keeps its conversation as chat messages (the chat-completions form the
// server renders with the chat template): every input message of that turn and of the turns
// before it (instructions excluded, as OpenAI does not carry them over), then the reply (text and
// tool calls). A later request naming it continues from those messages.
//
// Bounded by a count and a byte total: an entry is held as its serialized messages (a parsed
// tree takes several times their size), and charged that size; past either bound the least
// recently used entries (put or read) are evicted. An
// entry larger than the byte bound on its own is not stored. Nothing survives a restart.
// Thread-safe: every method may run on any io thread.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace tachyon::server {

inline constexpr size_t kResponseStoreMaxEntries = 1024;
inline constexpr size_t kResponseStoreMaxBytes = size_t{64} << 20;

class ResponseStore {
 public:
  explicit ResponseStore(size_t max_entries = kResponseStoreMaxEntries,
                         size_t max_bytes = kResponseStoreMaxBytes);

  // Stores (or replaces) the conversation of response `id`; `messages` is a JSON array.
  // Returns false when it is too large to be stored at all.
  bool Put(const std::string& id, const nlohmann::ordered_json& messages);
  // The conversation of `id`, or nullopt when unknown or evicted. Marks it recently used.
  std::optional<nlohmann::ordered_json> Get(const std::string& id);

  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::string id;
    std::string messages;  // serialized
    size_t bytes() const { return id.size() + messages.size(); }
  };
  void EvictLocked();

  const size_t max_entries_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first; GUARDED_BY(mu_)
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;  // GUARDED_BY(mu_)
  size_t bytes_ = 0;                                                   // GUARDED_BY(mu_)
};

}  // namespace tachyon::server
