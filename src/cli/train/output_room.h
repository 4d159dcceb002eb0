// Preflight of train's output directory: a warning (not an error: space may be freed meanwhile) when the file
// system that will hold output_dir has less free space than one checkpoint (12 bytes per parameter: fp32
// master, exp_avg and exp_avg_sq). Invariant: only statvfs is called, on the nearest existing ancestor.
#pragma once
#include <cstdint>
#include <filesystem>

namespace mt {

// Free bytes for the directory `dir` would be created in; -1 when unknown.
int64_t free_bytes_for(const std::filesystem::path& dir);
// Logs the warning when free_bytes_for(output_dir) < checkpoint_bytes.
void warn_if_no_room_for_checkpoint(const std::filesystem::path& output_dir, int64_t checkpoint_bytes);

}  // namespace mt
