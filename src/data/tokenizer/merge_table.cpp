// Linear probing over a power-of-two table kept at most half full; the empty key is all ones.
#include "data/tokenizer/merge_table.h"

#include "core/error.h"

namespace mt::tok {
namespace {
constexpr uint64_t empty_key = ~uint64_t{0};
}

MergeTable::MergeTable(size_t expected_pairs) {
  size_t capacity = 16;
  while (capacity < 2 * expected_pairs) capacity *= 2;
  slots_.assign(capacity, Slot{empty_key, Merge{}});
  mask_ = capacity - 1;
}

uint64_t MergeTable::key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

size_t MergeTable::slot_of(uint64_t k) const {
  uint64_t h = k * 0x9E3779B97F4A7C15ull;  // Fibonacci hashing spreads the two packed ids over all bits
  size_t i = static_cast<size_t>(h >> 20) & mask_;
  while (slots_[i].key != k && slots_[i].key != empty_key) i = (i + 1) & mask_;
  return i;
}

void MergeTable::insert(int32_t left, int32_t right, Merge merge) {
  const uint64_t k = key(left, right);
  Slot& slot = slots_[slot_of(k)];
  if (slot.key == empty_key) {
    MT_ASSERT(2 * (size_ + 1) <= slots_.size(), "more merges than the {} the table was sized for", slots_.size() / 2);
    slot.key = k;
    ++size_;
  }
  slot.merge = merge;
}

Merge MergeTable::find(int32_t left, int32_t right) const {
  const uint64_t k = key(left, right);
  return slots_[slot_of(k)].merge;
}

}  // namespace mt::tok
