// The globals a chat template sees besides its variables: transformers' raise_exception, strftime_now, namespace
// and dict, and Jinja's range.
#include <fmt/format.h>

#include <ctime>

#include "core/error.h"
#include "data/templates/jinja/arguments.h"
#include "data/templates/jinja/builtins.h"

namespace mt::jinja {

Dict make_globals() {
  Dict g;
  g.emplace_back("raise_exception", Value::of(Function([](Args& args) -> Value {
    const Bound b = bind_args("raise_exception", args, {"message"}, 1);
    throw Error(to_str(b.at(0)));
  })));
  g.emplace_back("strftime_now", Value::of(Function([](Args& args) {
    const Bound b = bind_args("strftime_now", args, {"format"}, 1);
    const std::string& format = need_string("strftime_now", "format", b.at(0));
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buffer[256];
    const size_t n = std::strftime(buffer, sizeof buffer, format.c_str(), &local);
    MT_REQUIRE(n > 0 || format.empty(), "strftime_now: format '{}' gives no text", format);
    return Value::of(std::string(buffer, n));
  })));
  // namespace(...) and dict(...): a mapping from an optional dict and keyword arguments.
  auto mapping = [](const char* what, bool is_namespace) {
    return Value::of(Function([what, is_namespace](Args& args) {
      MT_REQUIRE(args.positional.size() <= 1, "{}() takes at most one positional argument", what);
      Dict items;
      if (!args.positional.empty()) {
        MT_REQUIRE(args.positional[0].is(Value::Kind::dict), "{}(): the positional argument must be a dict", what);
        items = *args.positional[0].dict;
      }
      for (auto& [key, value] : args.keyword) {
        bool replaced = false;
        for (auto& [k, v] : items)
          if (k == key) v = value, replaced = true;
        if (!replaced) items.emplace_back(key, value);
      }
      Value out = Value::of(std::move(items));
      out.is_namespace = is_namespace;
      return out;
    }));
  };
  g.emplace_back("namespace", mapping("namespace", true));
  g.emplace_back("dict", mapping("dict", false));
  g.emplace_back("range", Value::of(Function([](Args& args) {
    const Bound b = bind_args("range", args, {"start", "stop", "step"}, 1);
    int64_t start = 0, stop = need_int("range", "stop", b.at(0)), step = 1;
    if (b.get(1)) {
      start = stop;
      stop = need_int("range", "stop", b.at(1));
    }
    if (b.get(2)) step = need_int("range", "step", b.at(2));
    MT_REQUIRE(step != 0, "range() arg 3 must not be zero");
    MT_REQUIRE((stop - start) / step < 1000000, "range() of more than 1000000 items");
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::of(i));
    return Value::of(std::move(out));
  })));
  return g;
}

}  // namespace mt::jinja
