// Python str methods over UTF-8 code points (see text.h).
#include "data/templates/jinja/text.h"

#include <algorithm>

namespace mt::jinja {
namespace {

size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

bool is_whitespace(const std::string& cp) {
  if (cp.size() == 1) return cp[0] == ' ' || (cp[0] >= '\t' && cp[0] <= '\r') || (cp[0] >= 0x1C && cp[0] <= 0x1F);
  static const char* const kSpaces[] = {"\xC2\x85", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81",
                                        "\xE2\x80\x82", "\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86",
                                        "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89", "\xE2\x80\x8A", "\xE2\x80\xA8",
                                        "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};
  return std::find(std::begin(kSpaces), std::end(kSpaces), cp) != std::end(kSpaces);
}

bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

std::string join(const std::vector<std::string>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) out += cps[i];
  return out;
}

}  // namespace

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = std::min(sequence_length(static_cast<unsigned char>(s[i])), s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right) {
  const std::vector<std::string> cps = code_points(s);
  const std::vector<std::string> set = chars ? code_points(*chars) : std::vector<std::string>{};
  auto strip_it = [&](const std::string& cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : is_whitespace(cp);
  };
  size_t begin = 0, end = cps.size();
  if (left)
    while (begin < end && strip_it(cps[begin])) ++begin;
  if (right)
    while (end > begin && strip_it(cps[end - 1])) --end;
  return join(cps, begin, end);
}

std::vector<std::string> py_split(const std::string& s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t begin = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t at = s.find(*sep, begin);
      if (at == std::string::npos) break;
      out.push_back(s.substr(begin, at - begin));
      begin = at + sep->size();
    }
    out.push_back(s.substr(begin));
    return out;
  }
  const std::vector<std::string> cps = code_points(s);
  size_t i = 0;
  while (true) {
    while (i < cps.size() && is_whitespace(cps[i])) ++i;
    if (i == cps.size()) return out;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t end = cps.size();
      while (end > i && is_whitespace(cps[end - 1])) --end;
      out.push_back(join(cps, i, end));
      return out;
    }
    const size_t start = i;
    while (i < cps.size() && !is_whitespace(cps[i])) ++i;
    out.push_back(join(cps, start, i));
  }
}

std::string py_upper(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = upper(c);
  return out;
}

std::string py_lower(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = lower(c);
  return out;
}

// Python's title(): a letter after a letter is lowered, any other letter raised.
std::string py_title(const std::string& s) {
  std::string out = s;
  bool previous_letter = false;
  for (char& c : out) {
    const bool letter = is_ascii_letter(c) || (static_cast<unsigned char>(c) >= 0x80);
    if (is_ascii_letter(c)) c = previous_letter ? lower(c) : upper(c);
    previous_letter = letter;
  }
  return out;
}

std::string py_capitalize(const std::string& s) {
  std::string out = py_lower(s);
  if (!out.empty()) out[0] = upper(out[0]);
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& with, int64_t count) {
  std::string out;
  size_t begin = 0;
  int64_t done = 0;
  if (old.empty()) {
    // Python puts `with` between every code point and at both ends.
    const std::vector<std::string> cps = code_points(s);
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      if (i < cps.size()) out += cps[i];
    }
    return out;
  }
  while (count < 0 || done < count) {
    const size_t at = s.find(old, begin);
    if (at == std::string::npos) break;
    out += s.substr(begin, at - begin) + with;
    begin = at + old.size();
    ++done;
  }
  return out + s.substr(begin);
}

}  // namespace mt::jinja
