// Binding a call's arguments to a builtin's Python signature, for filters, tests, methods and globals.
// Invariant: an argument the signature lacks, a missing required one or one given twice raises mt::Error naming
// the builtin; an optional one left out comes back as a null pointer.
#pragma once
#include <string>
#include <vector>

#include "data/templates/jinja/value.h"

namespace mt::jinja {

struct Bound {
  std::vector<Value> values;
  std::vector<bool> given;
  const Value* get(size_t i) const { return given[i] ? &values[i] : nullptr; }
  const Value& at(size_t i) const { return values[i]; }
};

// params: the parameter names in order; the first `required` of them must be given.
Bound bind_args(const std::string& what, Args& args, const std::vector<std::string>& params, size_t required = 0);

// The argument as the kind a builtin needs, or mt::Error "<what>: <name> must be <kind>".
const std::string& need_string(const std::string& what, const char* name, const Value& v);
int64_t need_int(const std::string& what, const char* name, const Value& v);

}  // namespace mt::jinja
