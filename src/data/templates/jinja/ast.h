// The syntax tree of a parsed template: expressions and statements, each with the line and column it starts at.
// Invariant: the parser builds it whole and the interpreter only reads it, so one tree renders from many threads.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/templates/jinja/value.h"

namespace mt::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    literal,    // value
    name,       // name
    list,       // items (tuple: a parenthesised or bare comma list)
    dict,       // items as key, value pairs
    attribute,  // a.name: items[0], name
    item,       // a[b]: items[0], items[1]
    slice,      // a[b:c:d]: items[0], then start/stop/step (null where left out)
    call,       // f(...): items[0] callee, then positional args; keyword in keywords
    filter,     // a | name(...): items[0] the operand (null in a filter block), then args; keyword in keywords
    test,       // a is [not] name(...): items[0], then args; negated
    unary,      // op: "-", "+", "not"
    binary,     // op: + - * / // % ** ~ == != < > <= >= in "not in" and or
    conditional // items[1] if items[0] else items[2] (items[2] null: undefined)
  };
  Kind kind;
  int line = 0;
  int column = 0;
  Value value;                 // literal
  std::string name;            // name, attribute, call/filter/test name, operator
  std::vector<ExprPtr> items;  // operands as above (null entries are slice parts left out)
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  bool tuple = false;
  bool negated = false;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    text,      // text
    output,    // {{ expr }}
    if_,       // branches (cond, body) ..., else_body
    for_,      // targets in expr [if filter]: body, else_body
    set,       // targets (one name, or a.b for a namespace attribute: target_attribute) = expr
    set_block, // {% set name %}body{% endset %}
    macro,     // name(params = defaults): body
    break_,
    continue_,
    scope      // {% generation %}body{% endgeneration %} (transformers' tag) renders its body
  };
  Kind kind;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;  // for / set names; macro parameters
  std::string target_attribute;      // set ns.attr: targets[0] is ns
  std::vector<ExprPtr> defaults;     // macro: one per parameter (null: none given)
};

struct Program {
  std::string file;
  Body body;
};

}  // namespace mt::jinja
