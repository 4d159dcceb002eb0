// Reading a checkpoint file (by one process, without MPI-IO): its /meta, its tensor list, tensors as fp32,
// restoring a HostStore, and finding the newest valid checkpoint of a run.
// Invariant: a file that is not HDF5, is truncated or corrupt, or lacks /meta fails in the constructor with
// one mt::Error naming the file; a tensor whose shape differs from the model's fails naming both shapes; every
// tensor read is checked — a NaN or infinity, or a checksum (tensor_checksum.h) that does not match its values,
// fails naming the file and the tensor — so resume, export and inspect never take a damaged state.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_meta.h"
#include "checkpoint/h5_handle.h"
#include "store/host_store.h"

namespace mt {

class CheckpointFile {
 public:
  explicit CheckpointFile(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const CheckpointMeta& meta() const { return meta_; }
  // The dataset names of a group ("params", "optim/exp_avg", "optim/exp_avg_sq"), sorted.
  std::vector<std::string> tensor_names(const std::string& group) const;
  std::vector<int64_t> shape(const std::string& group, const std::string& name) const;
  std::string dtype(const std::string& group, const std::string& name) const;  // "float32", ...
  // The run's model files (/model_files, CheckpointMeta::model_files); empty for a checkpoint written without them.
  std::map<std::string, std::string> model_files() const;
  // Reads a tensor as fp32; `expected` non-empty: its shape must equal it.
  std::vector<float> read(const std::string& group, const std::string& name,
                          const std::vector<int64_t>& expected = {}) const;
  // The same into dst[numel of `expected`], which the tensor's shape must equal.
  void read_into(const std::string& group, const std::string& name, const std::vector<int64_t>& expected,
                 float* dst) const;

 private:
  std::filesystem::path path_;
  h5::Handle file_;
  CheckpointMeta meta_;
};

// Fills master, exp_avg and exp_avg_sq of every region (all ranks' slices; the caller alone writes the store)
// and refreshes the stream copies. Every slot of the store's layout must be present with its shape.
void restore_store(const CheckpointFile& checkpoint, HostStore& store);

// The newest step-*.h5 in `dir` that opens as a checkpoint; others are skipped with a warning. None: nullopt.
std::optional<std::filesystem::path> find_latest_checkpoint(const std::filesystem::path& dir);

}  // namespace mt
