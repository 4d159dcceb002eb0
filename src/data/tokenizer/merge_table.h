// The BPE merge table: (left id, right id) -> (rank, merged id), an open-addressing hash table on one 64-bit key.
// Invariant: immutable after construction; a later insert of the same pair replaces the earlier one (as in
// `tokenizers`, where the last duplicate merge wins).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mt::tok {

struct Merge {
  int32_t rank = -1;  // -1: no such merge
  int32_t merged_id = -1;
};

class MergeTable {
 public:
  explicit MergeTable(size_t expected_pairs);
  void insert(int32_t left, int32_t right, Merge merge);
  Merge find(int32_t left, int32_t right) const;

 private:
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static uint64_t key(int32_t left, int32_t right);
  size_t slot_of(uint64_t k) const;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace mt::tok
