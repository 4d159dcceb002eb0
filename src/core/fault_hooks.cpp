// The test fault hooks, read once (see fault_hooks.h).
#include "core/fault_hooks.h"

#include <cstdlib>
#include <string>

namespace mt {
namespace {

// The variable's text, or nullptr where it is unset or empty.
const char* set_variable(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

FaultHooks read_fault_hooks() {
  FaultHooks h;
  if (const char* v = set_variable("MEGATRAIN_TEST_DIE_AT_STEP")) h.die_at_step = std::atoll(v);
  if (const char* v = set_variable("MEGATRAIN_TEST_SYNC_SAVE")) h.sync_save = std::string(v) != "0";
  if (const char* v = set_variable("MEGATRAIN_TEST_SLOW_SAVE")) h.slow_save_seconds = std::atof(v);
  if (const char* v = set_variable("MEGATRAIN_TEST_KILL_IN_SAVE")) h.kill_in_save_step = std::atoll(v);
  if (const char* v = set_variable("MEGATRAIN_TEST_SLOW_RENAME")) h.slow_rename_seconds = std::atof(v);
  if (const char* v = set_variable("MEGATRAIN_TEST_TIER_FULL_AFTER_WRITES")) h.tier_full_after_writes = std::atoll(v);
  if (const char* v = set_variable("MEGATRAIN_TEST_RANKS_PER_NODE")) h.ranks_per_node = std::atoi(v);
  return h;
}

}  // namespace

const FaultHooks& fault_hooks() {
  static const FaultHooks hooks = read_fault_hooks();
  return hooks;
}

}  // namespace mt
