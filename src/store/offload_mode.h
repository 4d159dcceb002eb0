// OffloadMode: which per-parameter state of the host store lives in files on NVMe (the tier) instead of RAM, and
// what that leaves per parameter in each place. Invariant: the modes differ only in where bytes are kept; the
// optimizer computes the same numbers in every mode (training is bitwise identical).
#pragma once
#include <cstdint>
#include <string>

namespace mt {

// none: master, m, v in RAM. optimizer: Adam m and v in files. optimizer_master: m, v and the fp32 master in files,
// the bf16 copy in RAM is what the GPU streams (requires a bf16 stream copy).
enum class OffloadMode { none, optimizer, optimizer_master };

OffloadMode offload_mode_from_name(const std::string& name);  // "none" | "optimizer" | "optimizer+master"
const char* offload_mode_name(OffloadMode mode);
inline bool offloads_master(OffloadMode mode) { return mode == OffloadMode::optimizer_master; }

// The fp32 state kinds of a parameter, in the order the tier's records hold them.
enum class StateKind { master = 0, exp_avg = 1, exp_avg_sq = 2 };
inline bool kind_offloaded(OffloadMode mode, StateKind kind) {
  return mode == OffloadMode::optimizer_master || (mode == OffloadMode::optimizer && kind != StateKind::master);
}
// fp32 kinds a mode keeps in files: 0, 2 or 3 (× 4 bytes per parameter on NVMe).
inline int64_t offloaded_kinds(OffloadMode mode) {
  return mode == OffloadMode::none ? 0 : mode == OffloadMode::optimizer ? 2 : 3;
}

}  // namespace mt
