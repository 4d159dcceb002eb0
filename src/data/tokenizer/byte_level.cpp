// The byte-level table, built once (GPT-2's bytes_to_unicode) and read-only afterwards.
#include "data/tokenizer/byte_level.h"

#include <array>

#include "data/tokenizer/utf8.h"

namespace mt::tok {
namespace {

struct ByteLevelTable {
  std::array<std::string, 256> chars;
  std::array<int16_t, 512> bytes;  // by code point; the table's characters all lie below U+0200

  ByteLevelTable() {
    bytes.fill(-1);
    char32_t next_free = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const char32_t c = printable ? static_cast<char32_t>(b) : next_free++;
      append_utf8(chars[b], c);
      bytes[c] = static_cast<int16_t>(b);
    }
  }
};

const ByteLevelTable& table() {
  static const ByteLevelTable t;
  return t;
}

}  // namespace

const std::string& char_for_byte(uint8_t b) { return table().chars[b]; }

int byte_for_char(char32_t c) { return c < 512 ? table().bytes[c] : -1; }

void append_byte_level(std::string& out, std::string_view bytes) {
  const ByteLevelTable& t = table();
  for (const char b : bytes) out.append(t.chars[static_cast<uint8_t>(b)]);
}

}  // namespace mt::tok
