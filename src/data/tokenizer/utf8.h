// UTF-8 primitives of the tokenizer: decoding one code point, encoding one, and repairing invalid input.
// Invariant: repair replaces each maximal ill-formed subpart with U+FFFD (Unicode §3.9, the rule of Python's
// bytes.decode('utf-8', 'replace') and Rust's String::from_utf8_lossy); valid input comes back unchanged.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace mt::tok {

// Length of the well-formed sequence starting at s[i], or 0 when s[i] starts an ill-formed one.
size_t utf8_sequence_length(std::string_view s, size_t i);
bool is_valid_utf8(std::string_view s);
// `s` with every maximal ill-formed subpart replaced by U+FFFD.
std::string to_valid_utf8(std::string_view s);

// The code point at s[i] of valid UTF-8; advances i past it.
char32_t next_code_point(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t c);

}  // namespace mt::tok
