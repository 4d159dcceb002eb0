// Tests of the test fault hooks: each variable read into its field, once per process.
// Invariant: the only fault_hooks() call of tests_core is here (the hooks are read at the first call).
#include <cstdlib>

#include "catch.h"
#include "core/fault_hooks.h"

TEST_CASE("fault hooks: each variable read once into its field", "[fault_hooks]") {
  setenv("MEGATRAIN_TEST_DIE_AT_STEP", "3", 1);
  setenv("MEGATRAIN_TEST_SYNC_SAVE", "1", 1);
  setenv("MEGATRAIN_TEST_SLOW_SAVE", "0.5", 1);
  setenv("MEGATRAIN_TEST_KILL_IN_SAVE", "4", 1);
  setenv("MEGATRAIN_TEST_SLOW_RENAME", "", 1);  // empty: off
  setenv("MEGATRAIN_TEST_TIER_FULL_AFTER_WRITES", "7", 1);
  setenv("MEGATRAIN_TEST_RANKS_PER_NODE", "2", 1);
  const mt::FaultHooks& h = mt::fault_hooks();
  CHECK(h.die_at_step == 3);
  CHECK(h.sync_save);
  CHECK(h.slow_save_seconds == 0.5);
  CHECK(h.kill_in_save_step == 4);
  CHECK(h.slow_rename_seconds == 0);
  CHECK(h.tier_full_after_writes == 7);
  CHECK(h.ranks_per_node == 2);
  setenv("MEGATRAIN_TEST_DIE_AT_STEP", "9", 1);
  CHECK(mt::fault_hooks().die_at_step == 3);  // read once: a later change is not seen
  for (const char* v : {"MEGATRAIN_TEST_DIE_AT_STEP", "MEGATRAIN_TEST_SYNC_SAVE", "MEGATRAIN_TEST_SLOW_SAVE",
                        "MEGATRAIN_TEST_KILL_IN_SAVE", "MEGATRAIN_TEST_SLOW_RENAME",
                        "MEGATRAIN_TEST_TIER_FULL_AFTER_WRITES", "MEGATRAIN_TEST_RANKS_PER_NODE"})
    unsetenv(v);
}
