// The regular-file check of inputs (see regular_file.h).
#include "core/regular_file.h"

#include "core/error.h"

namespace mt {

void require_regular_file(const std::filesystem::path& path, std::string_view what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  MT_REQUIRE(fs::exists(st), "{}: {}: file not found", what, path.string());
  const char* kind = fs::is_regular_file(st)    ? nullptr
                     : fs::is_directory(st)     ? "a directory"
                     : fs::is_fifo(st)          ? "a FIFO (named pipe)"
                     : fs::is_socket(st)        ? "a socket"
                     : fs::is_block_file(st) || fs::is_character_file(st) ? "a device"
                                                                          : "not a file";
  MT_REQUIRE(kind == nullptr, "{}: {}: is {}, not a regular file", what, path.string(), kind);
}

}  // namespace mt
