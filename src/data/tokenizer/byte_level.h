// GPT-2's reversible byte <-> character table of byte-level BPE: every byte stands for one printable character
// (bytes 33..126, 161..172, 174..255 for themselves, the other 68 for U+0100.. in byte order).
// Invariant: byte_for_char(char_for_byte(b)) == b for all 256 bytes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace mt::tok {

// UTF-8 of the character standing for byte b.
const std::string& char_for_byte(uint8_t b);
// The byte that character c stands for, or -1 when c stands for none.
int byte_for_char(char32_t c);
// Appends the byte-level form of `bytes` to `out`.
void append_byte_level(std::string& out, std::string_view bytes);

}  // namespace mt::tok
