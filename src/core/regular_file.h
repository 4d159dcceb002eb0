// Inputs that must be regular files (datasets, model files): a missing path, a directory, a FIFO, a socket or a
// device is refused by one line naming the path and what it is, before anything opens it (opening a FIFO would
// block until a writer comes). Invariant: only stat is called; nothing is opened.
#pragma once
#include <filesystem>
#include <string_view>

namespace mt {

// Throws mt::Error "<what>: <path>: file not found" or "<what>: <path>: is a FIFO (named pipe), not a regular file".
void require_regular_file(const std::filesystem::path& path, std::string_view what);

}  // namespace mt
