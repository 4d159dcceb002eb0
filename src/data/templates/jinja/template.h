// A Hugging Face chat template (Jinja) compiled once and rendered with Python's semantics, as transformers'
// apply_chat_template renders it (trim_blocks, lstrip_blocks, loop controls, {% generation %}, transformers' tojson,
// raise_exception, strftime_now, namespace, dict).
// Supported: text and {{ }} output; if/elif/else; for (tuple targets, `if` filter, else, loop.index/index0/revindex/
// revindex0/first/last/length/previtem/nextitem/cycle, break, continue); set (names, tuples, namespace attributes,
// set blocks); macros with defaults; literals, lists, tuples, dicts; attribute, item and slice access; arithmetic,
// ~, comparisons, in / not in, and/or/not, conditional expressions; the filters, tests, methods and globals of
// builtins.h. Not supported (an error naming the construct, at its line and column): extends, include, import,
// raw, call blocks, filter blocks, recursive loops, chained comparisons, printf-style `%` on strings.
// Invariant: rendering is a pure function of the template and the variables (strftime_now aside), and every error
// is one line "<file>:<line>:<column>: <message>".
#pragma once
#include <memory>
#include <string>

#include "data/templates/jinja/value.h"

namespace mt::jinja {

struct Program;

class Template {
 public:
  // `file` names the template in errors (e.g. "model/tokenizer_config.json (chat_template)").
  Template(const std::string& source, const std::string& file);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  std::string render(const Dict& variables) const;

 private:
  std::unique_ptr<Program> program_;
};

}  // namespace mt::jinja
