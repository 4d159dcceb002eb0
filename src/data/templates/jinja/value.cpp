// Truth, equality, str/repr and JSON conversion of template values (see value.h).
#include "data/templates/jinja/value.h"

#include "core/error.h"
#include "data/templates/python_json.h"

namespace mt::jinja {

const Value* Value::find(const std::string& key) const {
  if (kind != Kind::dict) return nullptr;
  for (const auto& [k, v] : *dict)
    if (k == key) return &v;
  return nullptr;
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined:
    case Value::Kind::none: return false;
    case Value::Kind::boolean: return v.boolean;
    case Value::Kind::integer: return v.integer != 0;
    case Value::Kind::floating: return v.floating != 0;
    case Value::Kind::string: return !v.string.empty();
    case Value::Kind::list: return !v.list->empty();
    case Value::Kind::dict: return v.is_namespace || !v.dict->empty();
    case Value::Kind::function: return true;
  }
  return false;
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Kind::floating || b.kind == Value::Kind::floating) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::undefined:
    case Value::Kind::none: return true;
    case Value::Kind::string: return a.string == b.string;
    case Value::Kind::list:
      if (a.tuple != b.tuple || a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); ++i)
        if (!equal((*a.list)[i], (*b.list)[i])) return false;
      return true;
    case Value::Kind::dict:
      if (a.is_namespace || b.is_namespace) return a.dict == b.dict;
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* other = b.find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    case Value::Kind::function: return a.function == b.function;
    default: return false;
  }
}

namespace {

// Python's repr of a str: single quotes unless the text has a single quote and no double quote.
std::string string_repr(const std::string& s) {
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == quote) {
          out += '\\';
          out += c;
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + quote;
}

}  // namespace

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return "";
    case Value::Kind::string: return v.string;
    default: return to_repr(v);
  }
}

std::string to_repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return "";
    case Value::Kind::none: return "None";
    case Value::Kind::boolean: return v.boolean ? "True" : "False";
    case Value::Kind::integer: return std::to_string(v.integer);
    case Value::Kind::floating: return python_float_repr(v.floating);
    case Value::Kind::string: return string_repr(v.string);
    case Value::Kind::list: {
      std::string out = v.tuple ? "(" : "[";
      for (size_t i = 0; i < v.list->size(); ++i) out += (i ? ", " : "") + to_repr((*v.list)[i]);
      if (v.tuple && v.list->size() == 1) out += ",";
      return out + (v.tuple ? ")" : "]");
    }
    case Value::Kind::dict: {
      std::string out = v.is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, item] : *v.dict) {
        out += (first ? "" : ", ") + string_repr(k) + ": " + to_repr(item);
        first = false;
      }
      return out + (v.is_namespace ? "}>" : "}");
    }
    case Value::Kind::function: return "<function>";
  }
  return "";
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return "Undefined";
    case Value::Kind::none: return "NoneType";
    case Value::Kind::boolean: return "bool";
    case Value::Kind::integer: return "int";
    case Value::Kind::floating: return "float";
    case Value::Kind::string: return "str";
    case Value::Kind::list: return v.tuple ? "tuple" : "list";
    case Value::Kind::dict: return v.is_namespace ? "Namespace" : "dict";
    case Value::Kind::function: return "function";
  }
  return "";
}

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::of(j.get<bool>());
    case T::number_integer:
    case T::number_unsigned: return Value::of(j.get<int64_t>());
    case T::number_float: return Value::of(j.get<double>());
    case T::string: return Value::of(j.get<std::string>());
    case T::array: {
      List items;
      for (const auto& item : j) items.push_back(from_json(item));
      return Value::of(std::move(items));
    }
    case T::object: {
      Dict items;
      for (const auto& [k, item] : j.items()) items.emplace_back(k, from_json(item));
      return Value::of(std::move(items));
    }
    default: return Value::undefined();
  }
}

nlohmann::ordered_json to_json(const Value& v) {
  switch (v.kind) {
    case Value::Kind::none: return nullptr;
    case Value::Kind::boolean: return v.boolean;
    case Value::Kind::integer: return v.integer;
    case Value::Kind::floating: return v.floating;
    case Value::Kind::string: return v.string;
    case Value::Kind::list: {
      auto out = nlohmann::ordered_json::array();
      for (const Value& item : *v.list) out.push_back(to_json(item));
      return out;
    }
    case Value::Kind::dict:
      if (!v.is_namespace) {
        auto out = nlohmann::ordered_json::object();
        for (const auto& [k, item] : *v.dict) out[k] = to_json(item);
        return out;
      }
      break;
    default: break;
  }
  throw Error(fmt::format("Object of type {} is not JSON serializable", type_name(v)));
}

}  // namespace mt::jinja
