// JSON text exactly as Python's json.dumps(value, ensure_ascii=False[, indent=n]) writes it, which is what
// LLaMA-Factory puts into prompts (tool descriptions, function calls). Invariant: keys keep their order; separators
// are ", " / ": " without indent and "," / ": " with it; non-ASCII text is written as is.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace mt {

// indent < 0: one line.
// Python's repr of a finite float (1.0, 0.30000000000000004, 1e+20).
std::string python_float_repr(double v);

std::string python_json_dumps(const nlohmann::ordered_json& value, int indent = -1);

}  // namespace mt
