// Jinja's filters and tests as chat templates use them; tojson is transformers' (json.dumps, ensure_ascii off).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/templates/jinja/arguments.h"
#include "data/templates/jinja/builtins.h"
#include "data/templates/jinja/text.h"
#include "data/templates/python_json.h"

namespace mt::jinja {
namespace {

// json.dumps(value, indent=indent, separators=(item, key), sort_keys=sort).
void dump(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep, bool sort, int depth,
          std::string& out) {
  const std::string pad = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ') : "";
  const std::string close = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  if (v.is(Value::Kind::list)) {
    if (v.list->empty()) {
      out += "[]";
      return;
    }
    out += "[";
    for (size_t i = 0; i < v.list->size(); ++i) {
      out += (i ? item_sep : "") + pad;
      dump((*v.list)[i], indent, item_sep, key_sep, sort, depth + 1, out);
    }
    out += close + "]";
    return;
  }
  if (v.is(Value::Kind::dict) && !v.is_namespace) {
    if (v.dict->empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& e : *v.dict) entries.push_back(&e);
    if (sort) std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
    out += "{";
    for (size_t i = 0; i < entries.size(); ++i) {
      out += (i ? item_sep : "") + pad + python_json_dumps(entries[i]->first) + key_sep;
      dump(entries[i]->second, indent, item_sep, key_sep, sort, depth + 1, out);
    }
    out += close + "}";
    return;
  }
  out += python_json_dumps(to_json(v));
}

Value tojson(const Value& v, Args& args) {
  const Bound b = bind_args("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  MT_REQUIRE(!b.get(0) || !truthy(b.at(0)), "tojson: ensure_ascii=True is not supported");
  int indent = -1;
  if (const Value* i = b.get(1); i && !i->is(Value::Kind::none)) indent = static_cast<int>(need_int("tojson", "indent", *i));
  std::string item_sep = indent >= 0 ? "," : ", ", key_sep = ": ";
  if (const Value* s = b.get(2); s && !s->is(Value::Kind::none)) {
    MT_REQUIRE(s->is(Value::Kind::list) && s->list->size() == 2, "tojson: separators must be a pair of strings");
    item_sep = need_string("tojson", "separators", (*s->list)[0]);
    key_sep = need_string("tojson", "separators", (*s->list)[1]);
  }
  std::string out;
  dump(v, indent, item_sep, key_sep, b.get(3) && truthy(b.at(3)), 0, out);
  return Value::of(out);
}

// A test given by name with its arguments (select / reject / selectattr / rejectattr).
bool run_test(const std::string& name, const Value& v, const std::vector<Value>& rest) {
  Args a{rest, {}};
  return apply_test(name, v, a);
}

Value select(const std::string& what, const Value& seq, Args& args, bool by_attribute, bool keep) {
  MT_REQUIRE(!by_attribute || !args.positional.empty(), "{}() missing required argument 'attribute'", what);
  const std::string attr = by_attribute ? need_string(what, "attribute", args.positional[0]) : "";
  const size_t first = by_attribute ? 1 : 0;
  const std::string test = args.positional.size() > first ? need_string(what, "test", args.positional[first]) : "";
  const std::vector<Value> rest(args.positional.begin() + static_cast<std::ptrdiff_t>(std::min(args.positional.size(), first + 1)),
                                args.positional.end());
  List out;
  for (const Value& v : iterate(seq)) {
    const Value subject = by_attribute ? attribute(v, attr) : v;
    const bool pass = test.empty() ? truthy(subject) : run_test(test, subject, rest);
    if (pass == keep) out.push_back(v);
  }
  return Value::of(std::move(out));
}

Value map_filter(const Value& seq, Args& args) {
  List out;
  for (const auto& [key, value] : args.keyword)
    MT_REQUIRE(key == "attribute" || key == "default", "map() got an unexpected keyword argument '{}'", key);
  const Value* attr = nullptr;
  const Value* fallback = nullptr;
  for (const auto& [key, value] : args.keyword) (key == "attribute" ? attr : fallback) = &value;
  if (attr) {
    for (const Value& v : iterate(seq)) {
      Value got = attribute(v, need_string("map", "attribute", *attr));
      out.push_back(got.is(Value::Kind::undefined) && fallback ? *fallback : got);
    }
    return Value::of(std::move(out));
  }
  MT_REQUIRE(!args.positional.empty(), "map() needs a filter name or attribute=");
  const std::string filter = need_string("map", "filter", args.positional[0]);
  for (const Value& v : iterate(seq)) {
    Args rest{std::vector<Value>(args.positional.begin() + 1, args.positional.end()), {}};
    out.push_back(apply_filter(filter, v, rest));
  }
  return Value::of(std::move(out));
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() < b.as_double();
  MT_REQUIRE(a.is(Value::Kind::string) && b.is(Value::Kind::string), "'<' not supported between instances of '{}' and '{}'",
             type_name(a), type_name(b));
  return a.string < b.string;
}

const char* const kFilters[] = {"abs", "capitalize", "count", "d", "default", "dictsort", "first", "float", "indent",
                                "int", "items", "join", "last", "length", "list", "lower", "map", "max", "min",
                                "rejectattr", "reject", "replace", "reverse", "round", "safe", "select",
                                "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper",
                                "wordcount"};

}  // namespace

bool has_filter(const std::string& name) {
  return std::find_if(std::begin(kFilters), std::end(kFilters), [&](const char* f) { return name == f; }) !=
         std::end(kFilters);
}

Value apply_filter(const std::string& name, const Value& v, Args& args) {
  if (name == "tojson") return tojson(v, args);
  if (name == "default" || name == "d") {
    const Bound b = bind_args(name, args, {"default_value", "boolean"});
    const bool use_default = v.is(Value::Kind::undefined) || (b.get(1) && truthy(b.at(1)) && !truthy(v));
    return use_default ? (b.get(0) ? b.at(0) : Value::of(std::string())) : v;
  }
  if (name == "length" || name == "count") {
    bind_args(name, args, {});
    return Value::of(length(v));
  }
  if (name == "trim") {
    const Bound b = bind_args(name, args, {"chars"});
    const std::string* chars = b.get(0) && !b.at(0).is(Value::Kind::none) ? &need_string(name, "chars", b.at(0)) : nullptr;
    return Value::of(py_strip(to_str(v), chars, true, true));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    bind_args(name, args, {});
    const std::string s = to_str(v);
    return Value::of(name == "upper" ? py_upper(s) : name == "lower" ? py_lower(s) : name == "title" ? py_title(s)
                                                                                                       : py_capitalize(s));
  }
  if (name == "string") {
    bind_args(name, args, {});
    return v.is(Value::Kind::string) ? v : Value::of(to_str(v));
  }
  if (name == "safe") {
    bind_args(name, args, {});
    return v;
  }
  if (name == "int" || name == "float") {
    const Bound b = bind_args(name, args, name == "int" ? std::vector<std::string>{"default", "base"}
                                                    : std::vector<std::string>{"default"});
    const Value fallback = b.get(0) ? b.at(0) : name == "int" ? Value::of(int64_t{0}) : Value::of(0.0);
    if (v.is_number()) return name == "int" ? Value::of(static_cast<int64_t>(v.as_double())) : Value::of(v.as_double());
    if (!v.is(Value::Kind::string)) return fallback;
    try {
      size_t used = 0;
      const std::string s = py_strip(v.string, nullptr, true, true);
      if (name == "int") {
        const int64_t i = std::stoll(s, &used);
        if (used == s.size()) return Value::of(i);
        const double d = std::stod(s, &used);
        return used == s.size() ? Value::of(static_cast<int64_t>(d)) : fallback;
      }
      const double d = std::stod(s, &used);
      return used == s.size() ? Value::of(d) : fallback;
    } catch (const std::exception&) {
      return fallback;
    }
  }
  if (name == "abs") {
    bind_args(name, args, {});
    MT_REQUIRE(v.is_number(), "bad operand type for abs(): '{}'", type_name(v));
    return v.is(Value::Kind::floating) ? Value::of(std::fabs(v.floating)) : Value::of(std::abs(v.as_int()));
  }
  if (name == "round") {
    const Bound b = bind_args(name, args, {"precision", "method"});
    MT_REQUIRE(v.is_number(), "round: {} is not a number", type_name(v));
    const double scale = std::pow(10.0, b.get(0) ? static_cast<double>(need_int(name, "precision", b.at(0))) : 0.0);
    return Value::of(std::round(v.as_double() * scale) / scale);
  }
  if (name == "join") {
    const Bound b = bind_args(name, args, {"d", "attribute"});
    const std::string sep = b.get(0) ? to_str(b.at(0)) : "";
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v)) {
      const Value piece = b.get(1) ? attribute(item, need_string(name, "attribute", b.at(1))) : item;
      out += (first ? "" : sep) + to_str(piece);
      first = false;
    }
    return Value::of(out);
  }
  if (name == "first" || name == "last") {
    bind_args(name, args, {});
    const List items = iterate(v);
    if (items.empty()) return Value::undefined(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    bind_args(name, args, {});
    return Value::of(iterate(v));
  }
  if (name == "items") {
    bind_args(name, args, {});
    if (v.is(Value::Kind::undefined)) return Value::of(List{});
    MT_REQUIRE(v.is(Value::Kind::dict), "items: can only get item pairs from a mapping, not {}", type_name(v));
    Args none;
    return attribute(v, "items").function->operator()(none);
  }
  if (name == "replace") {
    const Bound b = bind_args(name, args, {"old", "new", "count"}, 2);
    return Value::of(py_replace(to_str(v), to_str(b.at(0)), to_str(b.at(1)), b.get(2) ? need_int(name, "count", b.at(2)) : -1));
  }
  if (name == "select" || name == "reject") return select(name, v, args, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return select(name, v, args, true, name == "selectattr");
  if (name == "map") return map_filter(v, args);
  if (name == "reverse") {
    bind_args(name, args, {});
    if (v.is(Value::Kind::string)) {
      const std::vector<std::string> cps = code_points(v.string);
      std::string out;
      for (size_t i = cps.size(); i-- > 0;) out += cps[i];
      return Value::of(out);
    }
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::of(std::move(items));
  }
  if (name == "unique") {
    bind_args(name, args, {});
    List out;
    for (const Value& item : iterate(v))
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return equal(o, item); })) out.push_back(item);
    return Value::of(std::move(out));
  }
  if (name == "sort" || name == "dictsort") {
    const Bound b = bind_args(name, args, name == "sort" ? std::vector<std::string>{"reverse", "case_sensitive", "attribute"}
                                                    : std::vector<std::string>{"case_sensitive", "by", "reverse"});
    Args none;
    List items = name == "sort" ? iterate(v) : iterate(attribute(v, "items").function->operator()(none));
    const bool reverse = name == "sort" ? b.get(0) && truthy(b.at(0)) : b.get(2) && truthy(b.at(2));
    const std::string attr = name == "sort" && b.get(2) ? need_string(name, "attribute", b.at(2)) : "";
    const bool by_value = name == "dictsort" && b.get(1) && to_str(b.at(1)) == "value";
    auto key = [&](const Value& x) {
      if (name == "dictsort") return (*x.list)[by_value ? 1 : 0];
      return attr.empty() ? x : attribute(x, attr);
    };
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& c) {
      return reverse ? less(key(c), key(a)) : less(key(a), key(c));
    });
    return Value::of(std::move(items));
  }
  if (name == "sum" || name == "min" || name == "max") {
    bind_args(name, args, {});
    const List items = iterate(v);
    if (name == "sum") {
      Value total = Value::of(int64_t{0});
      for (const Value& item : items) {
        MT_REQUIRE(item.is_number(), "sum: {} is not a number", type_name(item));
        total = total.is(Value::Kind::floating) || item.is(Value::Kind::floating)
                    ? Value::of(total.as_double() + item.as_double()) : Value::of(total.as_int() + item.as_int());
      }
      return total;
    }
    if (items.empty()) return Value::undefined(name);
    Value best = items[0];
    for (const Value& item : items)
      if (name == "min" ? less(item, best) : less(best, item)) best = item;
    return best;
  }
  if (name == "indent") {
    const Bound b = bind_args(name, args, {"width", "first", "blank"});
    const std::string pad = b.get(0) ? (b.at(0).is(Value::Kind::string) ? b.at(0).string
                                                                        : std::string(static_cast<size_t>(need_int(name, "width", b.at(0))), ' '))
                                     : std::string(4, ' ');
    const bool first = b.get(1) && truthy(b.at(1)), blank = b.get(2) && truthy(b.at(2));
    // Jinja's: lines of s + "\n"; each line after the first indented (blank ones only with blank=True).
    std::vector<std::string> lines;
    const std::string s = to_str(v) + "\n";
    for (size_t begin = 0, end; (end = s.find('\n', begin)) != std::string::npos; begin = end + 1)
      lines.push_back(s.substr(begin, end - begin));
    std::string out = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) out += "\n" + (blank || !lines[i].empty() ? pad : "") + lines[i];
    return Value::of(first ? pad + out : out);
  }
  if (name == "wordcount") {
    bind_args(name, args, {});
    // Jinja counts \w+ runs: letters, digits, underscores (any non-ASCII byte counts as a letter here).
    int64_t words = 0;
    bool in_word = false;
    for (const unsigned char c : to_str(v)) {
      const bool word = c >= 0x80 || c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
      words += word && !in_word;
      in_word = word;
    }
    return Value::of(words);
  }
  throw Error(fmt::format("no filter named '{}'", name));
}

bool apply_test(const std::string& name, const Value& v, Args& args) {
  using Kd = Value::Kind;
  auto no_args = [&] { bind_args("test " + name, args, {}); };
  if (name == "defined") return no_args(), !v.is(Kd::undefined);
  if (name == "undefined") return no_args(), v.is(Kd::undefined);
  if (name == "none") return no_args(), v.is(Kd::none);
  if (name == "string") return no_args(), v.is(Kd::string);
  if (name == "mapping") return no_args(), v.is(Kd::dict);
  if (name == "sequence") return no_args(), v.is(Kd::list) || v.is(Kd::string) || v.is(Kd::dict);
  // Jinja's Undefined iterates (as nothing), so it passes `iterable`.
  if (name == "iterable") return no_args(), v.is(Kd::list) || v.is(Kd::string) || v.is(Kd::dict) || v.is(Kd::undefined);
  if (name == "number") return no_args(), v.is_number();
  if (name == "integer") return no_args(), v.is(Kd::integer);
  if (name == "float") return no_args(), v.is(Kd::floating);
  if (name == "boolean") return no_args(), v.is(Kd::boolean);
  if (name == "true") return no_args(), v.is(Kd::boolean) && v.boolean;
  if (name == "false") return no_args(), v.is(Kd::boolean) && !v.boolean;
  if (name == "callable") return no_args(), v.is(Kd::function);
  if (name == "lower" || name == "upper") {
    no_args();
    const std::string s = to_str(v);
    return (name == "lower" ? py_lower(s) : py_upper(s)) == s;
  }
  if (name == "even" || name == "odd") {
    no_args();
    MT_REQUIRE(v.is(Kd::integer), "test {}: {} is not an integer", name, type_name(v));
    return (v.integer % 2 == 0) == (name == "even");
  }
  const Bound b = bind_args("test " + name, args, {"other"}, 1);
  const Value& other = b.at(0);
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, other);
  if (name == "ne" || name == "!=") return !equal(v, other);
  if (name == "lt" || name == "<") return less(v, other);
  if (name == "gt" || name == ">") return less(other, v);
  if (name == "le" || name == "<=") return !less(other, v);
  if (name == "ge" || name == ">=") return !less(v, other);
  if (name == "sameas") {
    if (v.kind != other.kind) return false;
    if (v.is(Kd::list)) return v.list == other.list;
    if (v.is(Kd::dict)) return v.dict == other.dict;
    return equal(v, other);
  }
  if (name == "divisibleby") {
    const int64_t d = need_int("divisibleby", "num", other);
    MT_REQUIRE(d != 0, "test divisibleby: division by zero");
    return v.as_int() % d == 0;
  }
  if (name == "in") {
    if (other.is(Kd::string)) return v.is(Kd::string) && other.string.find(v.string) != std::string::npos;
    if (other.is(Kd::dict)) return v.is(Kd::string) && other.find(v.string) != nullptr;
    for (const Value& item : iterate(other))
      if (equal(item, v)) return true;
    return false;
  }
  throw Error(fmt::format("no test named '{}'", name));
}

}  // namespace mt::jinja
