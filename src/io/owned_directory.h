// Directories megatrain writes whole (an export, output_dir/final): the files are written into a fresh
// "<target>.tmp-XXXXXX" beside the target, listed in a manifest (kManifestName) that marks the directory as ours,
// and the directory is renamed onto the target. What the files are is the caller's business (write_files);
// this file owns only the temporary directory, the manifest and the replacement.
// Invariants: the target holds a complete directory or what it held before; a file, or a non-empty directory
// that is not ours, is never replaced unless the caller passes Replace::any (export --overwrite), and then only a
// directory; replacing one of ours removes exactly the files its manifest lists (anything else there is an error
// beforehand); a failure removes the temporary directory and nothing else; the directory and its files get the
// umask's permissions (0755 and 0644 under the usual umask), as mkdir and open would make them.
#pragma once
#include <filesystem>
#include <functional>
#include <string>

namespace mt {

inline constexpr const char* kManifestName = "megatrain_manifest.json";

enum class Replace {
  none,  // the target must be absent or an empty directory
  ours,  // also a directory megatrain wrote (its manifest lists everything in it): output_dir/final of a rerun
  any,   // also any directory, whatever it holds (export --overwrite)
};

// Checks the target against `replace` (throws mt::Error naming it), then writes and renames as above. `what`
// names the directory in messages ("export", "final model").
void write_owned_directory(const std::filesystem::path& target, Replace replace, const std::string& what,
                           const std::function<void(const std::filesystem::path& dir)>& write_files);

// Throws mt::Error naming the target when write_owned_directory would refuse it (a preflight before training).
void require_replaceable(const std::filesystem::path& target, Replace replace, const std::string& what);

// A small file of an owned directory (config.json, an index): written, fsynced and closed; a failure (a full disk)
// throws mt::Error naming the path, the OS error and the bytes written of those needed.
void write_file_durably(const std::filesystem::path& path, const std::string& text);

}  // namespace mt
