// A bounded, thread-safe cache from a word (one pre-token) to its BPE ids: most words of real text repeat, and
// a hit skips the merge loop. Invariant: never changes a result, only saves time; holds at most `capacity` words
// (a full shard is emptied before it takes a new word).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace mt::tok {

class WordCache {
 public:
  explicit WordCache(size_t capacity);
  ~WordCache();
  // Appends the cached ids of `word` to `out` and returns true, or returns false.
  bool find(std::string_view word, std::vector<int32_t>& out) const;
  void insert(std::string_view word, std::span<const int32_t> ids) const;

 private:
  struct Shard;
  static constexpr size_t shard_count = 32;
  Shard& shard_of(size_t hash) const;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace mt::tok
