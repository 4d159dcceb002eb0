// UTF-8 validation by Unicode's table of well-formed byte sequences (Table 3-7), lossy repair, and coding.
#include "data/tokenizer/utf8.h"

#include <cstdint>

namespace mt::tok {
namespace {

constexpr std::string_view replacement_char = "\xEF\xBF\xBD";

// The accepted range of the second byte after lead byte b (Table 3-7); later continuation bytes are 80..BF.
bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

size_t expected_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Bytes of the longest prefix of a well-formed sequence at s[i] (at least 1): the maximal subpart to replace.
size_t maximal_subpart(std::string_view s, size_t i) {
  const uint8_t lead = static_cast<uint8_t>(s[i]);
  const size_t want = expected_length(lead);
  if (want == 0) return 1;
  size_t n = 1;
  while (n < want && i + n < s.size()) {
    const uint8_t b = static_cast<uint8_t>(s[i + n]);
    if (!(n == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF))) break;
    ++n;
  }
  return n;
}

}  // namespace

size_t utf8_sequence_length(std::string_view s, size_t i) {
  const uint8_t lead = static_cast<uint8_t>(s[i]);
  const size_t want = expected_length(lead);
  if (want <= 1) return want;
  return maximal_subpart(s, i) == want ? want : 0;
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = utf8_sequence_length(s, i);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append(replacement_char);
      i += maximal_subpart(s, i);
    }
  }
  return out;
}

char32_t next_code_point(std::string_view s, size_t& i) {
  const uint8_t lead = static_cast<uint8_t>(s[i]);
  if (lead < 0x80) {
    ++i;
    return lead;
  }
  const size_t n = expected_length(lead);
  char32_t c = lead & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += n;
  return c;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace mt::tok
