// Typed readers for the scalar values of a YAML configuration (see yaml_fields.h).
// Invariant: a value is accepted only when its whole text parses as the type and lies within bounds.
#include "config/yaml_fields.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <optional>

#include "core/error.h"

namespace mt {
namespace {

[[noreturn]] void reject(const YAML::Node& node, const YamlPlace& place, std::string_view expected) {
  throw Error(fmt::format("{}: {}: {} is not {}", place.origin, place.path, describe_node(node), expected));
}

// The scalar's whole text as an integer of type T, or nothing.
template <typename T>
std::optional<T> parse_integer(const YAML::Node& node) {
  if (!node.IsScalar()) return std::nullopt;
  const std::string& text = node.Scalar();
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string describe_node(const YAML::Node& node) {
  if (node.IsScalar()) return fmt::format("'{}'", node.Scalar());
  if (node.IsSequence()) return "a sequence";
  if (node.IsMap()) return "a map";
  return "an empty value";
}

std::string read_text(const YAML::Node& node, const YamlPlace& place, bool allow_empty) {
  const char* expected = allow_empty ? "a string" : "a non-empty string";
  if (node.IsNull()) {
    if (!allow_empty) reject(node, place, expected);
    return "";
  }
  if (!node.IsScalar() || (!allow_empty && node.Scalar().empty())) reject(node, place, expected);
  return node.Scalar();
}

std::string read_choice(const YAML::Node& node, const YamlPlace& place, const std::vector<std::string_view>& choices,
                        const std::vector<std::pair<std::string_view, std::string_view>>& aliases) {
  if (node.IsScalar()) {
    for (std::string_view choice : choices)
      if (node.Scalar() == choice) return std::string(choice);
    for (const auto& [alias, choice] : aliases)
      if (node.Scalar() == alias) return std::string(choice);
  }
  std::string expected = fmt::format("one of {}", fmt::join(choices, ", "));
  if (!aliases.empty()) {
    std::vector<std::string_view> spellings;
    for (const auto& alias : aliases) spellings.push_back(alias.first);
    expected += fmt::format(" (or {})", fmt::join(spellings, ", "));
  }
  reject(node, place, expected);
}

bool read_flag(const YAML::Node& node, const YamlPlace& place) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) reject(node, place, "a boolean (true or false)");
  return value;
}

int64_t read_integer(const YAML::Node& node, const YamlPlace& place, int64_t min) {
  std::optional<int64_t> value = parse_integer<int64_t>(node);
  if (!value || *value < min) reject(node, place, fmt::format("an integer >= {}", min));
  return *value;
}

int64_t read_integer_or_auto(const YAML::Node& node, const YamlPlace& place, int64_t min, int64_t auto_value) {
  if (node.IsScalar() && node.Scalar() == "auto") return auto_value;
  std::optional<int64_t> value = parse_integer<int64_t>(node);
  if (!value || *value < min) reject(node, place, fmt::format("auto or an integer >= {}", min));
  return *value;
}

uint64_t read_unsigned(const YAML::Node& node, const YamlPlace& place) {
  std::optional<uint64_t> value = parse_integer<uint64_t>(node);
  if (!value) reject(node, place, "a non-negative integer");
  return *value;
}

double read_real(const YAML::Node& node, const YamlPlace& place, const RealBounds& bounds) {
  double value = 0.0;
  bool ok = node.IsScalar() && YAML::convert<double>::decode(node, value) && std::isfinite(value);
  ok = ok && (bounds.low_open ? value > bounds.low : value >= bounds.low);
  ok = ok && (bounds.high_open ? value < bounds.high : value <= bounds.high);
  if (ok) return value;
  std::string expected;
  if (std::isfinite(bounds.low) && std::isfinite(bounds.high))
    expected = fmt::format("a number in {}{}, {}{}", bounds.low_open ? '(' : '[', bounds.low, bounds.high,
                           bounds.high_open ? ')' : ']');
  else if (std::isfinite(bounds.low))
    expected = fmt::format("a number {} {}", bounds.low_open ? ">" : ">=", bounds.low);
  else if (std::isfinite(bounds.high))
    expected = fmt::format("a number {} {}", bounds.high_open ? "<" : "<=", bounds.high);
  else
    expected = "a finite number";
  reject(node, place, expected);
}

std::string real_to_text(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_not_of("-0123456789") == std::string::npos) text += ".0";
  return text;
}

}  // namespace mt
