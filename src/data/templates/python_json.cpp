// python_json_dumps: Python's json encoder output (escapes, separators, indentation, float repr).
// Invariant: strings escape only '"', '\\' and control characters (\b \f \n \r \t, others as \u00XX).
#include "data/templates/python_json.h"

#include <fmt/format.h>

#include <string>

namespace mt {
namespace {

using nlohmann::ordered_json;

void quote(const std::string& s, std::string& out) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        else out += c;
    }
  }
  out += '"';
}


void dump(const ordered_json& v, int indent, int level, std::string& out) {
  const std::string item_sep = indent < 0 ? ", " : ",";
  auto newline = [&](int depth) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * depth), ' ');
  };
  switch (v.type()) {
    case ordered_json::value_t::object: {
      if (v.empty()) { out += "{}"; return; }
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += item_sep;
        first = false;
        newline(level + 1);
        quote(key, out);
        out += ": ";
        dump(item, indent, level + 1, out);
      }
      newline(level);
      out += '}';
      return;
    }
    case ordered_json::value_t::array: {
      if (v.empty()) { out += "[]"; return; }
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) out += item_sep;
        newline(level + 1);
        dump(v[i], indent, level + 1, out);
      }
      newline(level);
      out += ']';
      return;
    }
    case ordered_json::value_t::string: quote(v.get_ref<const std::string&>(), out); return;
    case ordered_json::value_t::number_float: out += python_float_repr(v.get<double>()); return;
    case ordered_json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case ordered_json::value_t::null: out += "null"; return;
    default: out += v.dump(); return;  // integers
  }
}

}  // namespace

// Python's float repr: the shortest round-trip digits (nlohmann's), positional for decimal exponents in [-4, 16),
// otherwise "d.ddde+XX".
std::string python_float_repr(double v) {
  std::string s = ordered_json(v).dump();
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  int exp = 0;
  if (const size_t e = s.find('e'); e != std::string::npos) {
    exp = std::stoi(s.substr(e + 1));
    s.resize(e);
  }
  const size_t dot = s.find('.');
  const std::string int_part = s.substr(0, dot);
  std::string digits = int_part + (dot == std::string::npos ? "" : s.substr(dot + 1));
  int point = static_cast<int>(int_part.size()) + exp;  // value = 0.digits * 10^point
  const size_t nonzero = digits.find_first_not_of('0');
  if (nonzero == std::string::npos) return sign + "0.0";
  digits.erase(0, nonzero);
  point -= static_cast<int>(nonzero);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int exp10 = point - 1;
  const auto n = static_cast<int>(digits.size());
  if (exp10 >= -4 && exp10 < 16) {
    if (point <= 0) return sign + "0." + std::string(static_cast<size_t>(-point), '0') + digits;
    if (point >= n) return sign + digits + std::string(static_cast<size_t>(point - n), '0') + ".0";
    return sign + digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
  }
  const std::string mantissa = n > 1 ? digits.substr(0, 1) + "." + digits.substr(1) : digits;
  return fmt::format("{}{}e{}{:02d}", sign, mantissa, exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
}

std::string python_json_dumps(const ordered_json& value, int indent) {
  std::string out;
  dump(value, indent, 0, out);
  return out;
}

}  // namespace mt
