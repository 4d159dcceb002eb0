// The values a chat template computes with, as Python holds them under Jinja: undefined, None, bool, int, float, str,
// list (or tuple), dict (insertion-ordered, string keys), a namespace() and callables (macros, builtins).
// Invariant: lists and dicts are shared and never modified after creation (the sandbox transformers uses forbids
// it); only a namespace's attributes change, and every holder of it sees the change.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace mt::jinja {

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;

// Arguments of a call: positional, then keyword.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using Function = std::function<Value(Args&)>;

struct Value {
  enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, function };
  Kind kind = Kind::undefined;
  bool boolean = false;
  int64_t integer = 0;
  double floating = 0;
  std::string string;                    // kind string; for undefined, the name that was looked up
  std::shared_ptr<const List> list;      // kind list
  std::shared_ptr<Dict> dict;            // kind dict (mutable only through a namespace)
  std::shared_ptr<const Function> function;
  bool tuple = false;                    // a list written as Python's tuple: (a, b)
  bool is_namespace = false;             // a dict made by namespace(): attributes assignable with set

  static Value undefined(std::string name = "") { Value v; v.string = std::move(name); return v; }
  static Value none() { Value v; v.kind = Kind::none; return v; }
  static Value of(bool b) { Value v; v.kind = Kind::boolean; v.boolean = b; return v; }
  static Value of(int64_t i) { Value v; v.kind = Kind::integer; v.integer = i; return v; }
  static Value of(double f) { Value v; v.kind = Kind::floating; v.floating = f; return v; }
  static Value of(std::string s) { Value v; v.kind = Kind::string; v.string = std::move(s); return v; }
  static Value of(List l, bool tuple = false) {
    Value v; v.kind = Kind::list; v.list = std::make_shared<const List>(std::move(l)); v.tuple = tuple; return v;
  }
  static Value of(Dict d) { Value v; v.kind = Kind::dict; v.dict = std::make_shared<Dict>(std::move(d)); return v; }
  static Value of(Function f) {
    Value v; v.kind = Kind::function; v.function = std::make_shared<const Function>(std::move(f)); return v;
  }

  bool is(Kind k) const { return kind == k; }
  bool is_number() const { return kind == Kind::integer || kind == Kind::floating || kind == Kind::boolean; }
  double as_double() const { return kind == Kind::floating ? floating : static_cast<double>(as_int()); }
  int64_t as_int() const { return kind == Kind::boolean ? (boolean ? 1 : 0) : integer; }
  // The value of `key` in a dict, or nullptr.
  const Value* find(const std::string& key) const;
};

// Python's truth value (undefined is false).
bool truthy(const Value& v);
// Python's ==.
bool equal(const Value& a, const Value& b);
// Python's str() (undefined prints nothing), and repr() as lists and dicts print their items.
std::string to_str(const Value& v);
std::string to_repr(const Value& v);
// Python's type name, for error messages.
std::string type_name(const Value& v);

// JSON data (messages, tools, extra variables) as template values; objects keep their key order.
Value from_json(const nlohmann::ordered_json& j);
// A template value as JSON (for tojson); raises mt::Error for what json.dumps refuses (undefined, callables).
nlohmann::ordered_json to_json(const Value& v);

}  // namespace mt::jinja
