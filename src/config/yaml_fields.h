// Typed readers for the scalar values of a YAML configuration.
// Invariant: each returns a value of its type within the stated bounds, or throws mt::Error
// "<origin>: <path>: <value> is not <what is expected>" on one line.
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mt {

// Where a value came from, for messages: the file (or `--set` override) and the key path "section.key".
struct YamlPlace {
  std::string origin;
  std::string path;
};

// Bounds of a real value; an open end excludes the bound itself.
struct RealBounds {
  double low;
  double high;
  bool low_open = false;
  bool high_open = false;
};

// The node as a message shows it: 'text' for a scalar, else "a map", "a sequence" or "an empty value".
std::string describe_node(const YAML::Node& node);

// Any scalar's text; an empty value reads as "" unless `allow_empty` is false.
std::string read_text(const YAML::Node& node, const YamlPlace& place, bool allow_empty);
// One of `choices`; a spelling in `aliases` (alias, choice) reads as its choice.
std::string read_choice(const YAML::Node& node, const YamlPlace& place, const std::vector<std::string_view>& choices,
                        const std::vector<std::pair<std::string_view, std::string_view>>& aliases = {});
bool read_flag(const YAML::Node& node, const YamlPlace& place);
// A decimal integer >= min (`4.0` and `1e3` are not integers).
int64_t read_integer(const YAML::Node& node, const YamlPlace& place, int64_t min);
// `auto` reads as auto_value (below min); otherwise a decimal integer >= min.
int64_t read_integer_or_auto(const YAML::Node& node, const YamlPlace& place, int64_t min, int64_t auto_value);
uint64_t read_unsigned(const YAML::Node& node, const YamlPlace& place);
// A finite number within `bounds` (`1e-5`, `1.0e-5` and `3` all read).
double read_real(const YAML::Node& node, const YamlPlace& place, const RealBounds& bounds);

// The shortest text that reads back as exactly `value`, always with a '.' or an exponent (`1.0`, `1e-05`).
std::string real_to_text(double value);

}  // namespace mt
