// bind_args, need_string, need_int (see arguments.h).
#include "data/templates/jinja/arguments.h"

#include <fmt/format.h>

#include "core/error.h"

namespace mt::jinja {

Bound bind_args(const std::string& what, Args& args, const std::vector<std::string>& params, size_t required) {
  Bound b;
  b.values.resize(params.size());
  b.given.assign(params.size(), false);
  MT_REQUIRE(args.positional.size() <= params.size(), "{}() takes at most {} arguments ({} given)", what,
             params.size(), args.positional.size());
  for (size_t i = 0; i < args.positional.size(); ++i) {
    b.values[i] = args.positional[i];
    b.given[i] = true;
  }
  for (auto& [key, value] : args.keyword) {
    size_t i = 0;
    while (i < params.size() && params[i] != key) ++i;
    MT_REQUIRE(i < params.size(), "{}() got an unexpected keyword argument '{}'", what, key);
    MT_REQUIRE(!b.given[i], "{}() got multiple values for argument '{}'", what, key);
    b.values[i] = value;
    b.given[i] = true;
  }
  for (size_t i = 0; i < required; ++i)
    MT_REQUIRE(b.given[i], "{}() missing required argument '{}'", what, params[i]);
  return b;
}

const std::string& need_string(const std::string& what, const char* name, const Value& v) {
  MT_REQUIRE(v.is(Value::Kind::string), "{}: {} must be a string, not {}", what, name, type_name(v));
  return v.string;
}

int64_t need_int(const std::string& what, const char* name, const Value& v) {
  MT_REQUIRE(v.is(Value::Kind::integer) || v.is(Value::Kind::boolean), "{}: {} must be an integer, not {}", what,
             name, type_name(v));
  return v.as_int();
}

}  // namespace mt::jinja
