// LLaMA-Factory's checkpoint layout on request (training.save_hf_checkpoints): beside each HDF5 checkpoint, a
// Hugging Face directory <output_dir>/checkpoint-<step>/ of the weights at that step (config.json, safetensors,
// the run's tokenizer and chat files), as transformers' Trainer names them and from_pretrained loads them.
// Invariant: save_total_limit keeps the newest N of these as of the HDF5 files; only directories named
// checkpoint-<digits> whose manifest marks them as megatrain's (io/owned_directory.h) are ever removed.
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

namespace mt {

std::filesystem::path hf_checkpoint_dir(const std::filesystem::path& output_dir, int64_t step);

// Our checkpoint-<step> directories in output_dir, oldest first.
std::vector<std::filesystem::path> hf_checkpoint_dirs(const std::filesystem::path& output_dir);

// Removes the oldest of our checkpoint-<step> directories beyond the newest `keep` (keep <= 0: keeps all).
void prune_hf_checkpoints(const std::filesystem::path& output_dir, int64_t keep);

}  // namespace mt
