// attribute, item, slice, length, iterate, and the str / dict methods an attribute binds (see builtins.h).
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "data/templates/jinja/arguments.h"
#include "data/templates/jinja/builtins.h"
#include "data/templates/jinja/text.h"

namespace mt::jinja {
namespace {

Value strings(const std::vector<std::string>& pieces) {
  List out;
  for (const std::string& p : pieces) out.push_back(Value::of(p));
  return Value::of(std::move(out));
}

// startswith / endswith take one prefix or a tuple of them.
bool affix_matches(const std::string& what, const std::string& s, const Value& affix, bool at_start) {
  auto one = [&](const Value& a) {
    const std::string& p = need_string(what, "prefix", a);
    return p.size() <= s.size() && (at_start ? s.compare(0, p.size(), p) : s.compare(s.size() - p.size(), p.size(), p)) == 0;
  };
  if (affix.is(Value::Kind::list)) {
    for (const Value& a : *affix.list)
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

Value string_method(const std::string& s, const std::string& name, Args& args) {
  const std::string what = "str." + name;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Bound b = bind_args(what, args, {"chars"});
    const Value* chars = b.get(0);
    const std::string* set = chars && !chars->is(Value::Kind::none) ? &need_string(what, "chars", *chars) : nullptr;
    return Value::of(py_strip(s, set, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const Bound b = bind_args(what, args, {"sep", "maxsplit"});
    const Value* sep = b.get(0);
    const std::string* by = sep && !sep->is(Value::Kind::none) ? &need_string(what, "sep", *sep) : nullptr;
    MT_REQUIRE(!by || !by->empty(), "{}: empty separator", what);
    const int64_t max = b.get(1) ? need_int(what, "maxsplit", b.at(1)) : -1;
    MT_REQUIRE(name == "split" || max < 0, "str.rsplit with maxsplit is not supported");
    return strings(py_split(s, by, max));
  }
  if (name == "startswith" || name == "endswith") {
    const Bound b = bind_args(what, args, {"prefix"}, 1);
    return Value::of(affix_matches(what, s, b.at(0), name == "startswith"));
  }
  if (name == "replace") {
    const Bound b = bind_args(what, args, {"old", "new", "count"}, 2);
    return Value::of(py_replace(s, need_string(what, "old", b.at(0)), need_string(what, "new", b.at(1)),
                                b.get(2) ? need_int(what, "count", b.at(2)) : -1));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    bind_args(what, args, {});
    return Value::of(name == "upper" ? py_upper(s) : name == "lower" ? py_lower(s) : name == "title" ? py_title(s)
                                                                                                       : py_capitalize(s));
  }
  if (name == "find" || name == "rfind" || name == "count" || name == "index") {
    const Bound b = bind_args(what, args, {"sub"}, 1);
    const std::string& sub = need_string(what, "sub", b.at(0));
    if (name == "count") {
      if (sub.empty()) return Value::of(static_cast<int64_t>(code_points(s).size() + 1));
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value::of(n);
    }
    const size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
    MT_REQUIRE(name != "index" || at != std::string::npos, "str.index: substring not found");
    return Value::of(at == std::string::npos ? int64_t{-1}
                                             : static_cast<int64_t>(code_points(s.substr(0, at)).size()));
  }
  if (name == "join") {
    const Bound b = bind_args(what, args, {"iterable"}, 1);
    std::string out;
    bool first = true;
    for (const Value& v : iterate(b.at(0))) {
      out += (first ? "" : s) + need_string(what, "item", v);
      first = false;
    }
    return Value::of(out);
  }
  if (name == "splitlines") {
    bind_args(what, args, {});
    std::vector<std::string> lines;
    size_t begin = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        lines.push_back(s.substr(begin, i - begin));
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        begin = i + 1;
      }
    }
    if (begin < s.size()) lines.push_back(s.substr(begin));
    return strings(lines);
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    bind_args(what, args, {});
    if (s.empty()) return Value::of(false);
    for (const unsigned char c : s) {
      const bool ok = name == "isdigit" ? (c >= '0' && c <= '9')
                      : name == "isspace" ? (c == ' ' || (c >= '\t' && c <= '\r'))
                      : name == "isalpha" ? ((c | 32) >= 'a' && (c | 32) <= 'z')
                                          : ((c | 32) >= 'a' && (c | 32) <= 'z') || (c >= '0' && c <= '9');
      if (!ok) return Value::of(false);
    }
    return Value::of(true);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const Bound b = bind_args(what, args, {"affix"}, 1);
    const std::string& a = need_string(what, "affix", b.at(0));
    if (name == "removeprefix") return Value::of(s.compare(0, a.size(), a) == 0 ? s.substr(a.size()) : s);
    return Value::of(a.size() <= s.size() && s.compare(s.size() - a.size(), a.size(), a) == 0
                         ? s.substr(0, s.size() - a.size()) : s);
  }
  throw Error(fmt::format("'str' object has no method '{}'", name));
}

Value dict_method(const Value& d, const std::string& name, Args& args) {
  const std::string what = "dict." + name;
  if (name == "items" || name == "keys" || name == "values") {
    bind_args(what, args, {});
    List out;
    for (const auto& [k, v] : *d.dict) {
      if (name == "items") out.push_back(Value::of(List{Value::of(k), v}, true));
      else out.push_back(name == "keys" ? Value::of(k) : v);
    }
    return Value::of(std::move(out));
  }
  const Bound b = bind_args(what, args, {"key", "default"}, 1);
  if (!b.at(0).is(Value::Kind::string)) return b.get(1) ? b.at(1) : Value::none();
  const Value* found = d.find(b.at(0).string);
  return found ? *found : b.get(1) ? b.at(1) : Value::none();
}

bool is_string_method(const std::string& n) {
  for (const char* m : {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "upper",
                        "lower", "title", "capitalize", "find", "rfind", "count", "index", "join", "splitlines",
                        "isdigit", "isspace", "isalpha", "isalnum", "removeprefix", "removesuffix"})
    if (n == m) return true;
  return false;
}

// A negative index counts from the end; the result is clamped to [0, n].
int64_t clamp_index(int64_t i, int64_t n) {
  if (i < 0) i += n;
  return std::max<int64_t>(0, std::min(i, n));
}

}  // namespace

Value attribute(const Value& obj, const std::string& name) {
  if (obj.is(Value::Kind::string) && is_string_method(name)) {
    const std::string s = obj.string;
    return Value::of(Function([s, name](Args& args) { return string_method(s, name, args); }));
  }
  if (obj.is(Value::Kind::dict)) {
    if (!obj.is_namespace && (name == "items" || name == "keys" || name == "values" || name == "get")) {
      const Value d = obj;
      return Value::of(Function([d, name](Args& args) { return dict_method(d, name, args); }));
    }
    if (const Value* v = obj.find(name)) return *v;
  }
  return Value::undefined(name);
}

Value item(const Value& obj, const Value& key) {
  if (obj.is(Value::Kind::dict)) {
    if (key.is(Value::Kind::string)) {
      if (const Value* v = obj.find(key.string)) return *v;
      return Value::undefined(key.string);
    }
    return Value::undefined(to_str(key));
  }
  if ((obj.is(Value::Kind::list) || obj.is(Value::Kind::string)) &&
      (key.is(Value::Kind::integer) || key.is(Value::Kind::boolean))) {
    if (obj.is(Value::Kind::list)) {
      const auto n = static_cast<int64_t>(obj.list->size());
      const int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
      return i >= 0 && i < n ? (*obj.list)[static_cast<size_t>(i)] : Value::undefined(to_str(key));
    }
    const std::vector<std::string> cps = code_points(obj.string);
    const auto n = static_cast<int64_t>(cps.size());
    const int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
    return i >= 0 && i < n ? Value::of(cps[static_cast<size_t>(i)]) : Value::undefined(to_str(key));
  }
  if (key.is(Value::Kind::string)) return attribute(obj, key.string);
  return Value::undefined(to_str(key));
}

Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  auto given = [](const Value* v) { return v && !v->is(Value::Kind::none); };
  const int64_t by = given(step) ? need_int("slice", "step", *step) : 1;
  MT_REQUIRE(by != 0, "slice step cannot be zero");
  std::vector<Value> items;
  std::vector<std::string> cps;
  if (obj.is(Value::Kind::list)) items = *obj.list;
  else if (obj.is(Value::Kind::string)) cps = code_points(obj.string);
  else throw Error(fmt::format("'{}' object is not subscriptable", type_name(obj)));
  const auto n = static_cast<int64_t>(obj.is(Value::Kind::list) ? items.size() : cps.size());
  int64_t from, to;
  if (by > 0) {
    from = given(start) ? clamp_index(need_int("slice", "start", *start), n) : 0;
    to = given(stop) ? clamp_index(need_int("slice", "stop", *stop), n) : n;
  } else {
    // Python's negative-step bounds: start defaults to the last item, stop to before the first.
    auto bound = [&](int64_t i) { return i < 0 ? std::max<int64_t>(i + n, -1) : std::min(i, n - 1); };
    from = given(start) ? bound(need_int("slice", "start", *start)) : n - 1;
    to = given(stop) ? bound(need_int("slice", "stop", *stop)) : -1;
  }
  List out_items;
  std::string out_text;
  for (int64_t i = from; by > 0 ? i < to : i > to; i += by) {
    if (obj.is(Value::Kind::list)) out_items.push_back(items[static_cast<size_t>(i)]);
    else out_text += cps[static_cast<size_t>(i)];
  }
  if (obj.is(Value::Kind::string)) return Value::of(out_text);
  return Value::of(std::move(out_items), obj.tuple);
}

int64_t length(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return 0;
    case Value::Kind::string: return static_cast<int64_t>(code_points(v.string).size());
    case Value::Kind::list: return static_cast<int64_t>(v.list->size());
    case Value::Kind::dict: return static_cast<int64_t>(v.dict->size());
    default: throw Error(fmt::format("object of type '{}' has no len()", type_name(v)));
  }
}

List iterate(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return {};
    case Value::Kind::list: return *v.list;
    case Value::Kind::dict: {
      List keys;
      for (const auto& [k, item] : *v.dict) keys.push_back(Value::of(k));
      return keys;
    }
    case Value::Kind::string: {
      List chars;
      for (const std::string& cp : code_points(v.string)) chars.push_back(Value::of(cp));
      return chars;
    }
    default: throw Error(fmt::format("'{}' object is not iterable", type_name(v)));
  }
}

}  // namespace mt::jinja
