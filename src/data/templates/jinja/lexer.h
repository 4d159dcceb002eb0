// The Jinja lexer, configured as transformers configures its chat-template Environment: trim_blocks and
// lstrip_blocks on, keep_trailing_newline off, newlines normalised to "\n", `{%- -%}` / `{{- -}}` / `{#- -#}`
// whitespace control and `{%+ +%}` to keep what trim/lstrip would take.
// Invariant: text tokens hold exactly the template text Jinja would output for them; every token carries the line
// and column (1-based) where it starts in the original source.
#pragma once
#include <string>
#include <vector>

namespace mt::jinja {

struct Token {
  enum class Kind { text, output_begin, output_end, block_begin, block_end, name, string, integer, floating, op, end };
  Kind kind;
  std::string text;  // text: the literal text; name/op: the word; string: the decoded value; numbers: the digits
  int line = 1;
  int column = 1;
};

// Raises mt::Error "<file>:<line>:<column>: <message>" for an unterminated tag, comment or string, an unknown
// character or unbalanced brackets.
std::vector<Token> tokenize(const std::string& source, const std::string& file);

}  // namespace mt::jinja
