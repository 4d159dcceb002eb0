// One run per output directory: world rank 0 of `train` holds an exclusive flock on <output_dir>/.megatrain.lock
// for the run's life, the file naming its pid and host. A second run on the same directory is refused with one line
// naming them; a crashed run's lock is released by the kernel with its process, so it never blocks a later run.
// Everything the run keeps under a name derived from output_dir (checkpoints, final/, the state tier's files,
// store/tier_layout.h) belongs to the holder, so no other run removes or replaces it.
// Invariants: the lock is taken before anything of the run is written; the held file is the one the path names
// (a lock won on a file a finishing run just unlinked is retried); the holder unlinks the file before releasing it,
// and removes output_dir itself when it created it and nothing else was written there.
#pragma once
#include <filesystem>

namespace mt {

class OutputDirLock {
 public:
  // Creates output_dir where absent; throws mt::Error when another run holds it or the file cannot be made.
  explicit OutputDirLock(const std::filesystem::path& output_dir);
  ~OutputDirLock();
  OutputDirLock(const OutputDirLock&) = delete;
  OutputDirLock& operator=(const OutputDirLock&) = delete;

 private:
  std::filesystem::path dir_;
  std::filesystem::path file_;
  int fd_ = -1;
  bool created_dir_ = false;
};

inline constexpr const char* kOutputLockName = ".megatrain.lock";

}  // namespace mt
