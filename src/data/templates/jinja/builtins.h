// What a chat template can call besides its own macros: Jinja's filters and tests, the str / dict methods templates
// use, and the globals transformers adds (raise_exception, strftime_now, namespace, dict) with Jinja's range.
// Invariant: each behaves as its Python counterpart for the arguments chat templates give it; anything else
// (an unknown name, an argument it does not take) raises mt::Error naming it, never a guess.
#pragma once
#include <string>

#include "data/templates/jinja/value.h"

namespace mt::jinja {

// args.positional holds the arguments after the operand.
Value apply_filter(const std::string& name, const Value& operand, Args& args);
bool apply_test(const std::string& name, const Value& operand, Args& args);
bool has_filter(const std::string& name);

// obj.name as Jinja's sandboxed getattr sees it: a method bound to obj (str and dict methods), a dict's or a
// namespace's item, or undefined.
Value attribute(const Value& obj, const std::string& name);
// obj[key]: items of dicts, lists, tuples and strings (negative indices count from the end), else undefined.
Value item(const Value& obj, const Value& key);
// obj[start:stop:step] for lists, tuples and strings (nulls are the Python defaults).
Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step);

// raise_exception, strftime_now, namespace, dict, range.
Dict make_globals();

// Python's len(): code points of a str, items of a list or dict; raises for other kinds.
int64_t length(const Value& v);
// The items a for loop (or a filter) goes through: a list's items, a dict's keys, a str's characters; undefined
// gives none; anything else raises "'<type>' object is not iterable".
List iterate(const Value& v);

}  // namespace mt::jinja
