// Gathering and writing a run's model files (see model_files.h).
#include "cli/train/model_files.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <system_error>

#include "cli/train/chat_export.h"
#include "core/error.h"
#include "core/os_error.h"
#include "io/owned_directory.h"

namespace mt {

ModelFiles gather_model_files(const Config& c, const ModelSource& source, const std::string& model_family) {
  if (source.dir.empty()) return {};
  // The chat files are rendered where write_chat_files renders them at the end of a run: over the copied files.
  std::string pattern = (std::filesystem::temp_directory_path() / "megatrain-model-files-XXXXXX").string();
  MT_REQUIRE(::mkdtemp(pattern.data()) != nullptr, "{}: cannot create a temporary directory {}", os_error_first(errno),
             pattern);
  const std::filesystem::path dir = pattern;
  ModelFiles files;
  std::error_code ec;
  try {
    for (const std::string& name : tokenizer_file_names())
      if (std::filesystem::is_regular_file(source.dir / name)) {
        std::filesystem::copy_file(source.dir / name, dir / name, ec);
        MT_REQUIRE(!ec, "{}: cannot copy {} to {}", ec.message(), (source.dir / name).string(), dir.string());
      }
    write_chat_files(dir, c, model_family);
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      std::ifstream in(entry.path(), std::ios::binary);
      MT_REQUIRE(in.good(), "cannot read {}", entry.path().string());
      files[entry.path().filename().string()] = std::string(std::istreambuf_iterator<char>(in), {});
    }
  } catch (...) {
    std::filesystem::remove_all(dir, ec);
    throw;
  }
  std::filesystem::remove_all(dir, ec);
  return files;
}

void write_model_files(const std::filesystem::path& dir, const ModelFiles& files) {
  for (const auto& [name, bytes] : files) write_file_durably(dir / name, bytes);
}

}  // namespace mt
