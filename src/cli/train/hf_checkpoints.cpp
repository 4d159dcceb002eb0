// Hugging Face checkpoint-<step> directories (see hf_checkpoints.h).
#include "cli/train/hf_checkpoints.h"

#include <algorithm>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/log.h"
#include "io/owned_directory.h"

namespace mt {

std::filesystem::path hf_checkpoint_dir(const std::filesystem::path& output_dir, int64_t step) {
  return output_dir / ("checkpoint-" + std::to_string(step));
}

std::vector<std::filesystem::path> hf_checkpoint_dirs(const std::filesystem::path& output_dir) {
  std::vector<std::pair<int64_t, std::filesystem::path>> ours;  // (step, directory)
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(output_dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::string digits = name.substr(std::min(name.size(), sizeof("checkpoint-") - 1));
    if (!name.starts_with("checkpoint-") || digits.empty() || digits.size() > 18 ||
        digits.find_first_not_of("0123456789") != std::string::npos ||
        !std::filesystem::is_regular_file(e.path() / kManifestName))
      continue;
    ours.emplace_back(std::stoll(digits), e.path());
  }
  std::sort(ours.begin(), ours.end());
  std::vector<std::filesystem::path> dirs;
  for (auto& [step, dir] : ours) dirs.push_back(std::move(dir));
  return dirs;
}

void prune_hf_checkpoints(const std::filesystem::path& output_dir, int64_t keep) {
  if (keep <= 0) return;
  const std::vector<std::filesystem::path> ours = hf_checkpoint_dirs(output_dir);
  std::error_code ec;
  for (size_t i = 0; i + static_cast<size_t>(keep) < ours.size(); ++i) {
    std::filesystem::remove_all(ours[i], ec);
    log::info("removed old checkpoint {} (save_total_limit {})", ours[i].string(), keep);
  }
}

}  // namespace mt
