// Template: parse once, then walk the tree per render with Jinja's scoping (a for loop's body is a fresh scope each
// iteration; if blocks share their enclosing scope; a macro sees the template's top level at call time).
#include "data/templates/jinja/template.h"

#include <fmt/format.h>

#include <cmath>
#include <unordered_map>

#include "core/error.h"
#include "data/templates/jinja/ast.h"
#include "data/templates/jinja/builtins.h"
#include "data/templates/jinja/parser.h"

namespace mt::jinja {
namespace {

// An error already carrying its template position (inner errors are positioned once, at the innermost node).
struct PositionedError : Error {
  using Error::Error;
};

using Scope = std::unordered_map<std::string, Value>;
enum class Flow { normal, break_loop, continue_loop };

class Renderer {
 public:
  Renderer(const Program& program, const Dict& variables) : program_(program) {
    scopes_.emplace_back();
    for (auto& [k, v] : make_globals()) scopes_[0][k] = v;
    for (const auto& [k, v] : variables) scopes_[0][k] = v;
  }

  std::string run() {
    std::string out;
    exec(program_.body, out);
    return out;
  }

 private:
  template <typename Node>
  [[noreturn]] void fail(const Node& at, const std::string& message) const {
    throw PositionedError(fmt::format("{}:{}:{}: {}", program_.file, at.line, at.column, message));
  }
  // Runs f, giving any unpositioned mt::Error the node's position.
  template <typename Node, typename F>
  auto at(const Node& node, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const PositionedError&) {
      throw;
    } catch (const Error& e) {
      fail(node, e.what());
    }
  }

  Value lookup(const std::string& name) const {
    for (size_t i = scopes_.size(); i-- > 0;)
      if (auto it = scopes_[i].find(name); it != scopes_[i].end()) return it->second;
    return Value::undefined(name);
  }
  void assign(const std::string& name, Value v) { scopes_.back()[name] = std::move(v); }

  // ---- statements ----

  Flow exec(const Body& body, std::string& out) {
    for (const auto& s : body) {
      const Flow flow = exec(*s, out);
      if (flow != Flow::normal) return flow;
    }
    return Flow::normal;
  }

  Flow exec(const Stmt& s, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::text: out += s.text; return Flow::normal;
      case Stmt::Kind::output: out += to_str(eval(*s.expr)); return Flow::normal;
      case Stmt::Kind::if_:
        for (const auto& [cond, body] : s.branches)
          if (truthy(eval(*cond))) return exec(body, out);
        return exec(s.else_body, out);
      case Stmt::Kind::for_: return exec_for(s, out);
      case Stmt::Kind::set: {
        Value v = eval(*s.expr);
        if (!s.target_attribute.empty()) {
          const Value ns = lookup(s.targets[0]);
          if (!ns.is(Value::Kind::dict) || !ns.is_namespace) fail(s, "cannot assign attribute on non-namespace object");
          for (auto& [k, item] : *ns.dict)
            if (k == s.target_attribute) return item = std::move(v), Flow::normal;
          ns.dict->emplace_back(s.target_attribute, std::move(v));
          return Flow::normal;
        }
        unpack(s, s.targets, std::move(v));
        return Flow::normal;
      }
      case Stmt::Kind::set_block: {
        std::string text;
        exec(s.body, text);
        assign(s.targets[0], Value::of(std::move(text)));
        return Flow::normal;
      }
      case Stmt::Kind::macro: assign(s.text, make_macro(s)); return Flow::normal;
      case Stmt::Kind::break_: return Flow::break_loop;
      case Stmt::Kind::continue_: return Flow::continue_loop;
      case Stmt::Kind::scope: return exec(s.body, out);
    }
    return Flow::normal;
  }

  void unpack(const Stmt& s, const std::vector<std::string>& targets, Value v) {
    if (targets.size() == 1) return assign(targets[0], std::move(v));
    if (!v.is(Value::Kind::list)) fail(s, fmt::format("cannot unpack non-iterable {} object", type_name(v)));
    if (v.list->size() != targets.size())
      fail(s, fmt::format("expected {} values to unpack, got {}", targets.size(), v.list->size()));
    for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], (*v.list)[i]);
  }

  Flow exec_for(const Stmt& s, std::string& out) {
    const Value seq = eval(*s.expr);
    List items = at(*s.expr, [&] { return iterate(seq); });
    if (s.filter) {
      List kept;
      for (Value& item : items) {
        scopes_.emplace_back();
        unpack(s, s.targets, item);
        const bool keep = truthy(eval(*s.filter));
        scopes_.pop_back();
        if (keep) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(s.else_body, out);
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      scopes_.emplace_back();
      Dict loop;
      loop.emplace_back("index0", Value::of(i));
      loop.emplace_back("index", Value::of(i + 1));
      loop.emplace_back("revindex0", Value::of(n - i - 1));
      loop.emplace_back("revindex", Value::of(n - i));
      loop.emplace_back("first", Value::of(i == 0));
      loop.emplace_back("last", Value::of(i == n - 1));
      loop.emplace_back("length", Value::of(n));
      loop.emplace_back("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("previtem"));
      loop.emplace_back("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("nextitem"));
      loop.emplace_back("cycle", Value::of(Function([i](Args& args) {
        MT_REQUIRE(!args.positional.empty(), "loop.cycle() needs at least one value");
        return args.positional[static_cast<size_t>(i) % args.positional.size()];
      })));
      assign("loop", Value::of(std::move(loop)));
      unpack(s, s.targets, items[static_cast<size_t>(i)]);
      const Flow flow = exec(s.body, out);
      scopes_.pop_back();
      if (flow == Flow::break_loop) break;
    }
    return Flow::normal;
  }

  Value make_macro(const Stmt& s) {
    const Stmt* macro = &s;
    return Value::of(Function([this, macro](Args& args) {
      // The macro's scope sits on the template's top level, not on the caller's loop scopes.
      std::vector<Scope> saved;
      saved.swap(scopes_);
      scopes_.push_back(saved[0]);
      scopes_.emplace_back();
      struct Restore {
        std::vector<Scope>& scopes;
        std::vector<Scope>& saved;
        ~Restore() {
          saved[0] = std::move(scopes[0]);
          scopes.swap(saved);
        }
      } restore{scopes_, saved};
      const auto& params = macro->targets;
      if (args.positional.size() > params.size())
        fail(*macro, fmt::format("macro '{}' takes at most {} arguments ({} given)", macro->text, params.size(),
                                 args.positional.size()));
      std::vector<bool> given(params.size(), false);
      for (size_t i = 0; i < args.positional.size(); ++i) {
        assign(params[i], args.positional[i]);
        given[i] = true;
      }
      for (auto& [key, value] : args.keyword) {
        size_t i = 0;
        while (i < params.size() && params[i] != key) ++i;
        if (i == params.size()) fail(*macro, fmt::format("macro '{}' has no argument '{}'", macro->text, key));
        assign(key, value);
        given[i] = true;
      }
      for (size_t i = 0; i < params.size(); ++i)
        if (!given[i])
          assign(params[i], macro->defaults[i] ? eval(*macro->defaults[i]) : Value::undefined(params[i]));
      std::string text;
      exec(macro->body, text);
      return Value::of(std::move(text));
    }));
  }

  // ---- expressions ----

  [[noreturn]] void undefined_use(const Expr& e, const Value& v) const {
    fail(e, v.string.empty() ? std::string("undefined value") : fmt::format("'{}' is undefined", v.string));
  }

  // The expression as written, for naming an undefined value: messages[0].content.
  static std::string describe(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::name: return e.name;
      case Expr::Kind::attribute: return describe(*e.items[0]) + "." + e.name;
      case Expr::Kind::item:
        return describe(*e.items[0]) + "[" +
               (e.items[1]->kind == Expr::Kind::literal ? to_repr(e.items[1]->value) : describe(*e.items[1])) + "]";
      case Expr::Kind::literal: return to_repr(e.value);
      default: return "...";
    }
  }
  static Value named(Value v, const Expr& e) {
    if (v.is(Value::Kind::undefined)) v.string = describe(e);
    return v;
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::literal: return e.value;
      case Expr::Kind::name: return lookup(e.name);
      case Expr::Kind::list: {
        List items;
        for (const auto& item : e.items) items.push_back(eval(*item));
        return Value::of(std::move(items), e.tuple);
      }
      case Expr::Kind::dict: {
        Dict items;
        for (size_t i = 0; i < e.items.size(); i += 2) {
          const Value key = eval(*e.items[i]);
          if (!key.is(Value::Kind::string)) fail(*e.items[i], "dict keys must be strings here");
          Value value = eval(*e.items[i + 1]);
          bool replaced = false;
          for (auto& [k, v] : items)
            if (k == key.string) v = value, replaced = true;
          if (!replaced) items.emplace_back(key.string, std::move(value));
        }
        return Value::of(std::move(items));
      }
      case Expr::Kind::attribute: {
        const Value obj = eval(*e.items[0]);
        if (obj.is(Value::Kind::undefined)) undefined_use(*e.items[0], obj);
        return named(attribute(obj, e.name), e);
      }
      case Expr::Kind::item: {
        const Value obj = eval(*e.items[0]);
        if (obj.is(Value::Kind::undefined)) undefined_use(*e.items[0], obj);
        const Value key = eval(*e.items[1]);
        return named(at(e, [&] { return item(obj, key); }), e);
      }
      case Expr::Kind::slice: {
        const Value obj = eval(*e.items[0]);
        if (obj.is(Value::Kind::undefined)) undefined_use(*e.items[0], obj);
        Value parts[3];
        for (size_t i = 0; i < 3; ++i)
          if (e.items[i + 1]) parts[i] = eval(*e.items[i + 1]);
        auto part = [&](size_t i) { return e.items[i + 1] ? &parts[i] : nullptr; };
        return at(e, [&] { return slice(obj, part(0), part(1), part(2)); });
      }
      case Expr::Kind::call: {
        const Value callee = eval(*e.items[0]);
        Args args = arguments(e, 1);
        if (!callee.is(Value::Kind::function)) {
          if (callee.is(Value::Kind::undefined)) undefined_use(*e.items[0], callee);
          fail(e, fmt::format("'{}' object is not callable", type_name(callee)));
        }
        return at(e, [&] { return (*callee.function)(args); });
      }
      case Expr::Kind::filter: {
        if (!has_filter(e.name)) fail(e, fmt::format("no filter named '{}'", e.name));
        const Value operand = eval(*e.items[0]);
        Args args = arguments(e, 1);
        return at(e, [&] { return apply_filter(e.name, operand, args); });
      }
      case Expr::Kind::test: {
        const Value operand = eval(*e.items[0]);
        Args args = arguments(e, 1);
        return Value::of(at(e, [&] { return apply_test(e.name, operand, args); }) != e.negated);
      }
      case Expr::Kind::unary: {
        const Value v = eval(*e.items[0]);
        if (e.name == "not") return Value::of(!truthy(v));
        if (v.is(Value::Kind::floating)) return Value::of(e.name == "-" ? -v.floating : v.floating);
        if (!v.is_number()) fail(e, fmt::format("bad operand type for unary {}: '{}'", e.name, type_name(v)));
        return Value::of(e.name == "-" ? -v.as_int() : v.as_int());
      }
      case Expr::Kind::binary: return binary(e);
      case Expr::Kind::conditional:
        if (truthy(eval(*e.items[0]))) return eval(*e.items[1]);
        return e.items[2] ? eval(*e.items[2]) : Value::undefined();
    }
    return Value::undefined();
  }

  Args arguments(const Expr& e, size_t first) {
    Args args;
    for (size_t i = first; i < e.items.size(); ++i) args.positional.push_back(eval(*e.items[i]));
    for (const auto& [key, value] : e.keywords) args.keyword.emplace_back(key, eval(*value));
    return args;
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value left = eval(*e.items[0]);
      return truthy(left) ? eval(*e.items[1]) : left;
    }
    if (op == "or") {
      Value left = eval(*e.items[0]);
      return truthy(left) ? left : eval(*e.items[1]);
    }
    const Value a = eval(*e.items[0]);
    const Value b = eval(*e.items[1]);
    if (op == "~") return Value::of(to_str(a) + to_str(b));
    if (op == "==") return Value::of(equal(a, b));
    if (op == "!=") return Value::of(!equal(a, b));
    if (op == "in" || op == "not in") {
      Args args{{b}, {}};
      return Value::of(at(e, [&] { return apply_test("in", a, args); }) == (op == "in"));
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      Args args{{b}, {}};
      return Value::of(at(e, [&] { return apply_test(op, a, args); }));
    }
    for (const Value* v : {&a, &b})
      if (v->is(Value::Kind::undefined)) undefined_use(e, *v);
    using Kd = Value::Kind;
    if (op == "+") {
      if (a.is(Kd::string) && b.is(Kd::string)) return Value::of(a.string + b.string);
      if (a.is(Kd::list) && b.is(Kd::list) && a.tuple == b.tuple) {
        List items = *a.list;
        items.insert(items.end(), b.list->begin(), b.list->end());
        return Value::of(std::move(items), a.tuple);
      }
    }
    // str * int and list * int repeat, either way round.
    const bool a_repeats = (a.is(Kd::string) || a.is(Kd::list)) && (b.is(Kd::integer) || b.is(Kd::boolean));
    const bool b_repeats = (b.is(Kd::string) || b.is(Kd::list)) && (a.is(Kd::integer) || a.is(Kd::boolean));
    if (op == "*" && (a_repeats || b_repeats)) {
      const Value& seq = a_repeats ? a : b;
      const int64_t times = a_repeats ? b.as_int() : a.as_int();
      std::string s;
      List items;
      for (int64_t i = 0; i < times; ++i) {
        if (seq.is(Kd::string)) s += seq.string;
        else items.insert(items.end(), seq.list->begin(), seq.list->end());
      }
      return seq.is(Kd::string) ? Value::of(s) : Value::of(std::move(items), seq.tuple);
    }
    if (op == "%" && a.is(Kd::string)) fail(e, "printf-style '%' formatting of strings is not supported");
    if (!a.is_number() || !b.is_number())
      fail(e, fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b)));
    const bool floating = a.is(Kd::floating) || b.is(Kd::floating);
    if (op == "/") {
      if (b.as_double() == 0) fail(e, "division by zero");
      return Value::of(a.as_double() / b.as_double());
    }
    if (op == "**") {
      if (!floating && b.as_int() >= 0) {
        int64_t r = 1;
        for (int64_t i = 0; i < b.as_int(); ++i) r *= a.as_int();
        return Value::of(r);
      }
      return Value::of(std::pow(a.as_double(), b.as_double()));
    }
    if (floating) {
      const double x = a.as_double(), y = b.as_double();
      if (op == "+") return Value::of(x + y);
      if (op == "-") return Value::of(x - y);
      if (op == "*") return Value::of(x * y);
      if (y == 0) fail(e, "float division by zero");
      if (op == "//") return Value::of(std::floor(x / y));
      const double m = std::fmod(x, y);
      return Value::of(m != 0 && ((m < 0) != (y < 0)) ? m + y : m);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    if (op == "+") return Value::of(x + y);
    if (op == "-") return Value::of(x - y);
    if (op == "*") return Value::of(x * y);
    if (y == 0) fail(e, "integer division or modulo by zero");
    const int64_t q = x / y, r = x % y;
    const bool adjust = r != 0 && ((r < 0) != (y < 0));
    if (op == "//") return Value::of(adjust ? q - 1 : q);
    return Value::of(adjust ? r + y : r);
  }

  const Program& program_;
  std::vector<Scope> scopes_;
};

}  // namespace

Template::Template(const std::string& source, const std::string& file) : program_(parse(source, file)) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const Dict& variables) const { return Renderer(*program_, variables).run(); }

}  // namespace mt::jinja
