// Plain structs to and from JSON objects by name, through one table per struct: JsonFields<S>::table, a tuple of
// (key, member pointer) that both directions walk, so a member is written and read under the same key or not at
// all. Members may be integers, floating point, bool, strings, enums (written as their underlying value), vectors of
// any of these, and structs with a table of their own.
// Invariant: from_named_json accepts exactly the keys of each table: a missing key, an unknown one or a value of the
// wrong kind is refused with one line naming the object's path and the key.
#pragma once
#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace mt {

template <class S, class M>
struct JsonField {
  const char* key;
  M S::*member;
};

// Specialise for each struct: `static constexpr auto table = std::make_tuple(MT_JSON_FIELD(S, q), ...);`.
template <class S>
struct JsonFields;

// The table entry of member m of S, keyed by the member's own name (train_plan.cpp's tables and the step rates' use it).
#define MT_JSON_FIELD(S, m) ::mt::JsonField<S, decltype(S::m)>{#m, &S::m}

namespace json_fields_detail {

template <class T>
concept Described = requires { JsonFields<T>::table; };

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

template <class S>
bool has_key(const std::string& key) {
  return std::apply([&](const auto&... f) { return ((key == f.key) || ...); }, JsonFields<S>::table);
}

}  // namespace json_fields_detail

template <class T>
nlohmann::json to_named_json(const T& value) {
  using namespace json_fields_detail;
  if constexpr (Described<T>) {
    nlohmann::json j = nlohmann::json::object();
    std::apply([&](const auto&... f) { ((j[f.key] = to_named_json(value.*(f.member))), ...); }, JsonFields<T>::table);
    return j;
  } else if constexpr (IsVector<T>::value) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& element : value) j.push_back(to_named_json(element));
    return j;
  } else if constexpr (std::is_enum_v<T>) {
    return static_cast<std::underlying_type_t<T>>(value);
  } else {
    return value;
  }
}

// `path` names j in messages ("train plan.layout.regions[3].offsets").
template <class T>
void from_named_json(const nlohmann::json& j, const std::string& path, T& value) {
  using namespace json_fields_detail;
  if constexpr (Described<T>) {
    MT_REQUIRE(j.is_object(), "{}: an object expected, not {}", path, j.dump());
    const auto read_field = [&](const auto& f) {
      MT_REQUIRE(j.contains(f.key), "{}: no key '{}'", path, f.key);
      from_named_json(j.at(f.key), path + "." + f.key, value.*(f.member));
    };
    std::apply([&](const auto&... f) { (read_field(f), ...); }, JsonFields<T>::table);
    for (const auto& item : j.items())
      MT_REQUIRE(has_key<T>(item.key()), "{}: unknown key '{}'", path, item.key());
  } else if constexpr (IsVector<T>::value) {
    MT_REQUIRE(j.is_array(), "{}: an array expected, not {}", path, j.dump());
    value.assign(j.size(), {});
    for (size_t i = 0; i < j.size(); ++i) from_named_json(j[i], path + "[" + std::to_string(i) + "]", value[i]);
  } else if constexpr (std::is_enum_v<T>) {
    MT_REQUIRE(j.is_number_integer(), "{}: an enumerator's number expected, not {}", path, j.dump());
    value = static_cast<T>(j.get<std::underlying_type_t<T>>());
  } else {
    const bool kind = std::is_same_v<T, bool>            ? j.is_boolean()
                      : std::is_same_v<T, std::string>   ? j.is_string()
                      : std::is_integral_v<T>            ? j.is_number_integer()
                      : std::is_floating_point_v<T>      ? j.is_number()
                                                         : false;
    MT_REQUIRE(kind, "{}: a value of another kind expected, not {}", path, j.dump());
    value = j.get<T>();
  }
}

}  // namespace mt
