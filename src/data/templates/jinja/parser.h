// The Jinja parser: tokens to a Program, with Jinja's operator precedence (conditional < or < and < not <
// comparisons < + - < ~ < * / // % < ** < unary - + < postfix . [] () with filters | and tests `is`).
// Invariant: a template it accepts means what Jinja makes of it; statements it does not know (extends, include,
// import, raw, call blocks, filter blocks, with) are errors naming them, never silently skipped.
#pragma once
#include <memory>
#include <string>

#include "data/templates/jinja/ast.h"

namespace mt::jinja {

// Raises mt::Error "<file>:<line>:<column>: <message>".
std::unique_ptr<Program> parse(const std::string& source, const std::string& file);

}  // namespace mt::jinja
