// Python str operations on UTF-8 text, by code point as Python counts: strip, split, title, code-point lists.
// Invariant: each returns what the Python str method of the same name returns for the same (valid UTF-8) text;
// "whitespace" is Python's ASCII whitespace set plus U+0085, U+00A0, U+2000-U+200A, U+2028/9, U+3000; case changes
// touch ASCII letters only (a limit: Python's upper() also changes other scripts' letters).
#pragma once
#include <string>
#include <vector>

namespace mt::jinja {

// The text cut into code points (each a UTF-8 byte string).
std::vector<std::string> code_points(const std::string& s);

// chars empty: whitespace; otherwise any of the code points in chars.
std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right);
// sep null: runs of whitespace, no empty pieces; maxsplit < 0: no limit.
std::vector<std::string> py_split(const std::string& s, const std::string* sep, int64_t maxsplit);
std::string py_upper(const std::string& s);
std::string py_lower(const std::string& s);
std::string py_title(const std::string& s);
std::string py_capitalize(const std::string& s);
std::string py_replace(const std::string& s, const std::string& old, const std::string& with, int64_t count);

}  // namespace mt::jinja
