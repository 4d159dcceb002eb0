// A search pattern of tokenizer.json — {"String": literal} or {"Regex": PCRE-compatible pattern} — and its
// non-overlapping matches. Invariant: regexes run with Unicode classes (PCRE2 UTF + UCP, JIT-compiled) on valid
// UTF-8; a Pattern is immutable and safe to use from many threads at once.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mt::tok {

struct CompiledRegex;

class Pattern {
 public:
  static Pattern literal(std::string text);
  // `where` names the pattern in error messages (file and JSON path).
  static Pattern regex(const std::string& pattern, const std::string& where);
  // {"String": ...} or {"Regex": ...}.
  static Pattern from_json(const nlohmann::json& j, const std::string& where);

  // The non-empty matches in `text` (valid UTF-8), left to right, as [begin, end) byte offsets.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  // `text` with every match replaced by `content`.
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::shared_ptr<const CompiledRegex> regex_;
};

}  // namespace mt::tok
