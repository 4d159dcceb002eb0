// Fault injection for the tests (not documented for users): the MEGATRAIN_TEST_* variables that make a run die,
// stall or fill up at a chosen point, so that tests/cli and tests/mpi can check recovery.
// Invariant: the variables are read here, once per process (the first fault_hooks() call), and nowhere else; an
// unset or empty variable leaves its hook off, and production code asks fault_hooks(), never the environment.
#pragma once
#include <cstdint>

namespace mt {

struct FaultHooks {
  int64_t die_at_step = -1;             // MEGATRAIN_TEST_DIE_AT_STEP: world rank 1 SIGKILLs itself on this step
  bool sync_save = false;               // MEGATRAIN_TEST_SYNC_SAVE (not 0): every checkpoint saves synchronously
  double slow_save_seconds = 0;         // MEGATRAIN_TEST_SLOW_SAVE: the background write starts this late
  int64_t kill_in_save_step = -1;       // MEGATRAIN_TEST_KILL_IN_SAVE: rank 0 SIGKILLs itself before this step's rename
  double slow_rename_seconds = 0;       // MEGATRAIN_TEST_SLOW_RENAME: rank 0 waits this long before the rename
  int64_t tier_full_after_writes = -1;  // MEGATRAIN_TEST_TIER_FULL_AFTER_WRITES: the NVMe tier fills after N writes
  int ranks_per_node = 0;               // MEGATRAIN_TEST_RANKS_PER_NODE: every k consecutive ranks are one "node"
};

const FaultHooks& fault_hooks();

}  // namespace mt
