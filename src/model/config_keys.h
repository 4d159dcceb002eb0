// Typed, validated access to one JSON object of a model's config.json, for the family parsers.
// Invariant: absent and null keys both take the default; every rejection names the config file and the key path.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mt {

struct ConfigKeys {
  const nlohmann::json& j;
  const std::string& origin;
  std::string where;  // "" at top level, e.g. "rope_parameters." inside a nested dict

  bool has(const char* key) const { return j.contains(key) && !j.at(key).is_null(); }
  const nlohmann::json& at(const char* key) const { return j.at(key); }
  int64_t integer(const char* key) const {
    MT_REQUIRE(has(key), "model config {}: required key '{}{}' is missing", origin, where, key);
    const nlohmann::json& v = j.at(key);
    MT_REQUIRE(v.is_number_integer(), "model config {}: key '{}{}' must be an integer, got {}", origin, where, key,
               v.dump());
    return v.get<int64_t>();
  }
  int64_t integer(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  int64_t positive(const char* key) const {
    const int64_t v = integer(key);
    MT_REQUIRE(v > 0, "model config {}: key '{}{}' must be positive, got {}", origin, where, key, v);
    return v;
  }
  double number(const char* key) const {
    MT_REQUIRE(has(key), "model config {}: required key '{}{}' is missing", origin, where, key);
    const nlohmann::json& v = j.at(key);
    MT_REQUIRE(v.is_number(), "model config {}: key '{}{}' must be a number, got {}", origin, where, key, v.dump());
    return v.get<double>();
  }
  double number(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const nlohmann::json& v = j.at(key);
    MT_REQUIRE(v.is_boolean(), "model config {}: key '{}{}' must be true or false, got {}", origin, where, key,
               v.dump());
    return v.get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const nlohmann::json& v = j.at(key);
    MT_REQUIRE(v.is_string(), "model config {}: key '{}{}' must be a string, got {}", origin, where, key, v.dump());
    return v.get<std::string>();
  }
  std::vector<double> numbers(const char* key) const {
    MT_REQUIRE(has(key), "model config {}: required key '{}{}' is missing", origin, where, key);
    const nlohmann::json& v = j.at(key);
    MT_REQUIRE(v.is_array(), "model config {}: key '{}{}' must be a list of numbers", origin, where, key);
    std::vector<double> out;
    for (const auto& e : v) {
      MT_REQUIRE(e.is_number(), "model config {}: key '{}{}' must be a list of numbers, got {}", origin, where, key,
                 e.dump());
      out.push_back(e.get<double>());
    }
    return out;
  }
  // The nested object `key` ({} when absent).
  ConfigKeys object(const char* key) const {
    static const nlohmann::json empty = nlohmann::json::object();
    if (!has(key)) return {empty, origin, where + key + "."};
    MT_REQUIRE(j.at(key).is_object(), "model config {}: key '{}{}' must be an object", origin, where, key);
    return {j.at(key), origin, where + key + "."};
  }
};

}  // namespace mt
