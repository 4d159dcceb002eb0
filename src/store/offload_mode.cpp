// Offload mode names (see offload_mode.h).
#include "store/offload_mode.h"

#include "core/error.h"

namespace mt {

OffloadMode offload_mode_from_name(const std::string& name) {
  if (name == "none") return OffloadMode::none;
  if (name == "optimizer") return OffloadMode::optimizer;
  if (name == "optimizer+master") return OffloadMode::optimizer_master;
  throw Error(fmt::format("offload mode '{}': expected none, optimizer or optimizer+master", name));
}

const char* offload_mode_name(OffloadMode mode) {
  switch (mode) {
    case OffloadMode::none: return "none";
    case OffloadMode::optimizer: return "optimizer";
    case OffloadMode::optimizer_master: return "optimizer+master";
  }
  return "none";
}

}  // namespace mt
