#include "server/response_store.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace tachyon::server {
namespace {

using nlohmann::ordered_json;

ordered_json Messages(const std::string& text) {
  return ordered_json::array({{{"role", "user"}, {"content", text}}});
}

TEST(ResponseStoreTest, KeepsAndReturnsConversations) {
  ResponseStore store;
  EXPECT_TRUE(store.Put("a", Messages("hello")));
  auto got = store.Get("a");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ((*got)[0]["content"], "hello");
  EXPECT_FALSE(store.Get("b").has_value());
  EXPECT_EQ(store.size(), 1u);
}

TEST(ResponseStoreTest, EvictsTheLeastRecentlyUsedPastTheCount) {
  ResponseStore store(/*max_entries=*/2, /*max_bytes=*/1 << 20);
  store.Put("a", Messages("1"));
  store.Put("b", Messages("2"));
  ASSERT_TRUE(store.Get("a"));  // a is now more recent than b
  store.Put("c", Messages("3"));
  EXPECT_TRUE(store.Get("a"));
  EXPECT_FALSE(store.Get("b"));
  EXPECT_TRUE(store.Get("c"));
  EXPECT_EQ(store.size(), 2u);
}

TEST(ResponseStoreTest, BoundsTheBytesAndRefusesWhatCannotFit) {
  const size_t one = 1 + Messages(std::string(100, 'x')).dump().size();
  ResponseStore store(/*max_entries=*/100, /*max_bytes=*/2 * one);
  store.Put("a", Messages(std::string(100, 'x')));
  store.Put("b", Messages(std::string(100, 'y')));
  EXPECT_EQ(store.bytes(), 2 * one);
  store.Put("c", Messages(std::string(100, 'z')));
  EXPECT_FALSE(store.Get("a"));
  EXPECT_LE(store.bytes(), 2 * one);
  EXPECT_FALSE(store.Put("d", Messages(std::string(3 * one, 'w'))));
  EXPECT_FALSE(store.Get("d"));
  // Replacing an entry recharges it.
  store.Put("b", Messages("short"));
  EXPECT_LT(store.bytes(), 2 * one);
}

TEST(ResponseStoreTest, ConcurrentUseStaysWithinBounds) {
  ResponseStore store(/*max_entries=*/16, /*max_bytes=*/1 << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&store, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string id = std::to_string(t) + "-" + std::to_string(i);
        store.Put(id, Messages(id));
        auto got = store.Get(id);
        if (got) EXPECT_EQ((*got)[0]["content"], id);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(store.size(), 16u);
}

}  // namespace
}  // namespace tachyon::server
