// The nesting bound of every JSON input (config.json, tokenizer.json, dataset and tokenized records, safetensors
// headers, `tokenize --decode` lines): text nested deeper than kMaxNestingDepth arrays and objects is refused
// before any parser or recursive walk sees it, so hostile input cannot exhaust the stack or the memory.
// Invariant: the scan is linear in the text, allocates nothing, and counts brackets outside strings only.
#pragma once
#include <string_view>

namespace mt {

inline constexpr int kMaxNestingDepth = 512;

// Throws mt::Error "<source>: JSON nested deeper than 512 levels (at byte N)" when the text nests deeper.
void require_json_depth(std::string_view text, std::string_view source);

}  // namespace mt
