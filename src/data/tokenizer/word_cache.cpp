// Sharded maps under reader/writer locks, so threads encoding in parallel rarely wait on each other.
#include "data/tokenizer/word_cache.h"

#include <algorithm>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace mt::tok {
namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace

struct WordCache::Shard {
  mutable std::shared_mutex mutex;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> words;
  size_t capacity = 0;
};

WordCache::WordCache(size_t capacity) : shards_(std::make_unique<Shard[]>(shard_count)) {
  for (size_t i = 0; i < shard_count; ++i) shards_[i].capacity = std::max<size_t>(1, capacity / shard_count);
}

WordCache::~WordCache() = default;

WordCache::Shard& WordCache::shard_of(size_t hash) const { return shards_[(hash >> 7) % shard_count]; }

bool WordCache::find(std::string_view word, std::vector<int32_t>& out) const {
  Shard& shard = shard_of(StringHash{}(word));
  std::shared_lock lock(shard.mutex);
  const auto it = shard.words.find(word);
  if (it == shard.words.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::insert(std::string_view word, std::span<const int32_t> ids) const {
  Shard& shard = shard_of(StringHash{}(word));
  std::unique_lock lock(shard.mutex);
  if (shard.words.size() >= shard.capacity) shard.words.clear();
  shard.words.emplace(std::string(word), std::vector<int32_t>(ids.begin(), ids.end()));
}

}  // namespace mt::tok
