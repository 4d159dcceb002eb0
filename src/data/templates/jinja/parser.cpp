// parse: recursive descent over the lexer's tokens, one function per Jinja grammar level (see parser.h).
#include "data/templates/jinja/parser.h"

#include <fmt/format.h>

#include <initializer_list>

#include "core/error.h"
#include "data/templates/jinja/lexer.h"

namespace mt::jinja {
namespace {

using K = Token::Kind;

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string file) : tokens_(std::move(tokens)), file_(std::move(file)) {}

  std::unique_ptr<Program> run() {
    auto program = std::make_unique<Program>();
    program->file = file_;
    std::string ended;
    program->body = body({}, ended);
    return program;
  }

 private:
  const Token& cur() const { return tokens_[at_]; }
  const Token& peek(size_t n = 1) const { return tokens_[std::min(at_ + n, tokens_.size() - 1)]; }
  const Token& take() { return tokens_[at_ < tokens_.size() - 1 ? at_++ : at_]; }

  [[noreturn]] void fail(const Token& t, const std::string& message) const {
    throw Error(fmt::format("{}:{}:{}: {}", file_, t.line, t.column, message));
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case K::end: return "end of template";
      case K::block_end: return "end of statement block";
      case K::output_end: return "end of print statement";
      case K::text: return "template text";
      case K::string: return "string";
      default: return "'" + t.text + "'";
    }
  }
  bool is_op(const char* op) const { return cur().kind == K::op && cur().text == op; }
  bool is_name(const char* name) const { return cur().kind == K::name && cur().text == name; }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(cur(), fmt::format("expected '{}', got {}", op, describe(cur())));
    take();
  }
  std::string expect_name() {
    if (cur().kind != K::name) fail(cur(), fmt::format("expected a name, got {}", describe(cur())));
    return take().text;
  }
  void expect_block_end() {
    if (cur().kind != K::block_end) fail(cur(), fmt::format("expected end of statement block, got {}", describe(cur())));
    take();
  }

  ExprPtr node(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }

  // ---- statements ----

  // Statements up to a block whose first word is one of `ends` (that word is left in `ended`, its block open).
  Body body(std::initializer_list<const char*> ends, std::string& ended) {
    Body out;
    while (true) {
      const Token& t = cur();
      if (t.kind == K::end) {
        if (ends.size() != 0) fail(t, fmt::format("unexpected end of template, expected '{}'", *(ends.end() - 1)));
        return out;
      }
      if (t.kind == K::text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::text;
        s->line = t.line;
        s->column = t.column;
        s->text = t.text;
        take();
        out.push_back(std::move(s));
        continue;
      }
      if (t.kind == K::output_begin) {
        take();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::output;
        s->line = t.line;
        s->column = t.column;
        s->expr = tuple_expr(true);
        if (cur().kind != K::output_end) fail(cur(), fmt::format("expected end of print statement, got {}", describe(cur())));
        take();
        out.push_back(std::move(s));
        continue;
      }
      if (t.kind != K::block_begin) fail(t, fmt::format("unexpected {}", describe(t)));
      const Token& word = peek();
      if (word.kind != K::name) fail(word, fmt::format("expected a statement name, got {}", describe(word)));
      for (const char* end : ends) {
        if (word.text == end) {
          take();
          take();
          ended = end;
          return out;
        }
      }
      take();
      out.push_back(statement());
    }
  }

  std::unique_ptr<Stmt> statement() {
    const Token& word = take();
    auto s = std::make_unique<Stmt>();
    s->line = word.line;
    s->column = word.column;
    const std::string& w = word.text;
    std::string ended;
    if (w == "if") {
      s->kind = Stmt::Kind::if_;
      ExprPtr cond = expression(true);
      expect_block_end();
      while (true) {
        Body b = body({"elif", "else", "endif"}, ended);
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (ended == "elif") {
          cond = expression(true);
          expect_block_end();
          continue;
        }
        if (ended == "else") {
          expect_block_end();
          s->else_body = body({"endif"}, ended);
        }
        expect_block_end();
        return s;
      }
    }
    if (w == "for") {
      s->kind = Stmt::Kind::for_;
      const bool paren = is_op("(");
      if (paren) take();
      s->targets.push_back(expect_name());
      while (is_op(",")) {
        take();
        s->targets.push_back(expect_name());
      }
      if (paren) expect_op(")");
      if (!is_name("in")) fail(cur(), fmt::format("expected 'in', got {}", describe(cur())));
      take();
      s->expr = tuple_expr(false);
      if (is_name("if")) {
        take();
        s->filter = expression(true);
      }
      if (is_name("recursive")) fail(cur(), "recursive for loops are not supported");
      expect_block_end();
      s->body = body({"else", "endfor"}, ended);
      if (ended == "else") {
        expect_block_end();
        s->else_body = body({"endfor"}, ended);
      }
      expect_block_end();
      return s;
    }
    if (w == "set") {
      s->targets.push_back(expect_name());
      if (is_op(".")) {
        take();
        s->target_attribute = expect_name();
      } else {
        while (is_op(",")) {
          take();
          s->targets.push_back(expect_name());
        }
      }
      if (cur().kind == K::block_end && s->targets.size() == 1 && s->target_attribute.empty()) {
        s->kind = Stmt::Kind::set_block;
        take();
        s->body = body({"endset"}, ended);
        expect_block_end();
        return s;
      }
      s->kind = Stmt::Kind::set;
      expect_op("=");
      s->expr = tuple_expr(true);
      expect_block_end();
      return s;
    }
    if (w == "macro") {
      s->kind = Stmt::Kind::macro;
      s->text = expect_name();
      expect_op("(");
      while (!is_op(")")) {
        s->targets.push_back(expect_name());
        if (is_op("=")) {
          take();
          s->defaults.push_back(expression(true));
        } else {
          s->defaults.push_back(nullptr);
        }
        if (!is_op(",")) break;
        take();
      }
      expect_op(")");
      expect_block_end();
      s->body = body({"endmacro"}, ended);
      expect_block_end();
      return s;
    }
    if (w == "break" || w == "continue") {
      s->kind = w == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_;
      expect_block_end();
      return s;
    }
    if (w == "generation") {
      s->kind = Stmt::Kind::scope;
      expect_block_end();
      s->body = body({"endgeneration"}, ended);
      expect_block_end();
      return s;
    }
    for (const char* known : {"extends", "include", "import", "from", "raw", "call", "filter", "with", "block",
                              "autoescape"})
      if (w == known) fail(word, fmt::format("the '{}' statement is not supported in chat templates here", w));
    fail(word, fmt::format("unknown statement '{}'", w));
  }

  // ---- expressions ----

  // A comma list without brackets is a tuple (`{{ a, b }}`, `for x in a, b`, `set x = 1, 2`).
  ExprPtr tuple_expr(bool with_conditional) {
    const Token& start = cur();
    ExprPtr first = expression(with_conditional);
    if (!is_op(",")) return first;
    auto t = node(Expr::Kind::list, start);
    t->tuple = true;
    t->items.push_back(std::move(first));
    while (is_op(",")) {
      take();
      if (cur().kind == K::block_end || cur().kind == K::output_end) break;
      t->items.push_back(expression(with_conditional));
    }
    return t;
  }

  ExprPtr expression(bool with_conditional) {
    ExprPtr e = or_expr();
    if (!with_conditional) return e;
    while (is_name("if")) {
      const Token& at = take();
      auto c = node(Expr::Kind::conditional, at);
      c->items.push_back(or_expr());
      c->items.push_back(std::move(e));
      if (is_name("else")) {
        take();
        c->items.push_back(expression(true));
      } else {
        c->items.push_back(nullptr);
      }
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const Token& at, const std::string& op, ExprPtr left, ExprPtr right) {
    auto b = node(Expr::Kind::binary, at);
    b->name = op;
    b->items.push_back(std::move(left));
    b->items.push_back(std::move(right));
    return b;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      const Token& at = take();
      e = binary(at, "or", std::move(e), and_expr());
    }
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      const Token& at = take();
      e = binary(at, "and", std::move(e), not_expr());
    }
    return e;
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      const Token& at = take();
      auto u = node(Expr::Kind::unary, at);
      u->name = "not";
      u->items.push_back(not_expr());
      return u;
    }
    return compare();
  }
  // One comparison; a chain (a < b < c) is refused rather than guessed.
  ExprPtr compare() {
    ExprPtr e = math1();
    bool compared = false;
    while (true) {
      std::string op;
      const Token& at = cur();
      if (cur().kind == K::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" ||
                                  cur().text == "<=" || cur().text == ">=")) {
        op = take().text;
      } else if (is_name("in")) {
        take();
        op = "in";
      } else if (is_name("not") && peek().kind == K::name && peek().text == "in") {
        take();
        take();
        op = "not in";
      } else {
        return e;
      }
      if (compared) fail(at, "chained comparisons are not supported");
      compared = true;
      e = binary(at, op, std::move(e), math1());
    }
  }
  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      const Token& at = take();
      e = binary(at, at.text, std::move(e), concat());
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = math2();
    while (is_op("~")) {
      const Token& at = take();
      e = binary(at, "~", std::move(e), math2());
    }
    return e;
  }
  ExprPtr math2() {
    ExprPtr e = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& at = take();
      e = binary(at, at.text, std::move(e), power());
    }
    return e;
  }
  ExprPtr power() {
    ExprPtr e = unary(true);
    while (is_op("**")) {
      const Token& at = take();
      e = binary(at, "**", std::move(e), unary(true));
    }
    return e;
  }
  ExprPtr unary(bool with_filter) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& at = take();
      e = node(Expr::Kind::unary, at);
      e->name = at.text;
      e->items.push_back(unary(false));
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filters_and_tests(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& t = cur();
    switch (t.kind) {
      case K::name: {
        take();
        auto e = node(Expr::Kind::literal, t);
        if (t.text == "true" || t.text == "True") e->value = Value::of(true);
        else if (t.text == "false" || t.text == "False") e->value = Value::of(false);
        else if (t.text == "none" || t.text == "None") e->value = Value::none();
        else {
          e->kind = Expr::Kind::name;
          e->name = t.text;
        }
        return e;
      }
      case K::string: {
        auto e = node(Expr::Kind::literal, t);
        std::string s;
        while (cur().kind == K::string) s += take().text;  // adjacent strings join, as in Python
        e->value = Value::of(std::move(s));
        return e;
      }
      case K::integer: {
        take();
        auto e = node(Expr::Kind::literal, t);
        try {
          e->value = Value::of(static_cast<int64_t>(std::stoll(t.text)));
        } catch (const std::out_of_range&) {
          fail(t, fmt::format("integer {} is out of range", t.text));
        }
        return e;
      }
      case K::floating: {
        take();
        auto e = node(Expr::Kind::literal, t);
        e->value = Value::of(std::stod(t.text));
        return e;
      }
      case K::op:
        if (t.text == "(") {
          take();
          if (is_op(")")) {
            take();
            auto e = node(Expr::Kind::list, t);
            e->tuple = true;
            return e;
          }
          ExprPtr first = expression(true);
          if (is_op(")")) {
            take();
            return first;
          }
          auto e = node(Expr::Kind::list, t);
          e->tuple = true;
          e->items.push_back(std::move(first));
          while (is_op(",")) {
            take();
            if (is_op(")")) break;
            e->items.push_back(expression(true));
          }
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          take();
          auto e = node(Expr::Kind::list, t);
          while (!is_op("]")) {
            e->items.push_back(expression(true));
            if (!is_op(",")) break;
            take();
          }
          expect_op("]");
          return e;
        }
        if (t.text == "{") {
          take();
          auto e = node(Expr::Kind::dict, t);
          while (!is_op("}")) {
            e->items.push_back(expression(true));
            expect_op(":");
            e->items.push_back(expression(true));
            if (!is_op(",")) break;
            take();
          }
          expect_op("}");
          return e;
        }
        break;
      default: break;
    }
    fail(t, fmt::format("unexpected {}", describe(t)));
  }

  // Attribute, item and call nodes are placed where their target starts (errors point at the whole expression).
  ExprPtr postfix(ExprPtr e) {
    while (true) {
      Token at = cur();
      at.line = e->line;
      at.column = e->column;
      if (is_op(".")) {
        take();
        auto a = node(Expr::Kind::attribute, at);
        if (cur().kind == K::integer) {
          a->kind = Expr::Kind::item;
          auto index = node(Expr::Kind::literal, cur());
          index->value = Value::of(static_cast<int64_t>(std::stoll(take().text)));
          a->items.push_back(std::move(e));
          a->items.push_back(std::move(index));
        } else {
          a->name = expect_name();
          a->items.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (is_op("[")) {
        take();
        e = subscript(at, std::move(e));
      } else if (is_op("(")) {
        e = call(at, std::move(e), Expr::Kind::call);
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(const Token& at, ExprPtr target) {
    std::vector<ExprPtr> parts;
    bool is_slice = false;
    parts.push_back(is_op(":") ? nullptr : expression(true));
    while (is_op(":") && parts.size() < 3) {
      take();
      is_slice = true;
      parts.push_back(is_op(":") || is_op("]") ? nullptr : expression(true));
    }
    expect_op("]");
    auto e = node(is_slice ? Expr::Kind::slice : Expr::Kind::item, at);
    e->items.push_back(std::move(target));
    for (auto& p : parts) e->items.push_back(std::move(p));
    while (is_slice && e->items.size() < 4) e->items.push_back(nullptr);
    return e;
  }

  // `(args)` after a callee, a filter or a test: positional arguments, then name=value ones.
  void arguments(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (cur().kind == K::name && peek().kind == K::op && peek().text == "=") {
        std::string key = take().text;
        take();
        e.keywords.emplace_back(std::move(key), expression(true));
      } else {
        if (!e.keywords.empty()) fail(cur(), "positional argument follows keyword argument");
        e.items.push_back(expression(true));
      }
      if (!is_op(",")) break;
      take();
    }
    expect_op(")");
  }

  ExprPtr call(const Token& at, ExprPtr callee, Expr::Kind kind) {
    auto e = node(kind, at);
    e->items.push_back(std::move(callee));
    arguments(*e);
    return e;
  }

  ExprPtr filters_and_tests(ExprPtr e) {
    while (true) {
      const Token& at = cur();
      if (is_op("|")) {
        take();
        auto f = node(Expr::Kind::filter, at);
        f->name = expect_name();
        while (is_op(".")) {
          take();
          f->name += '.';
          f->name += expect_name();
        }
        f->items.push_back(std::move(e));
        if (is_op("(")) arguments(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        take();
        auto t = node(Expr::Kind::test, at);
        if (is_name("not")) {
          take();
          t->negated = true;
        }
        t->name = expect_name();
        t->items.push_back(std::move(e));
        if (is_op("(")) {
          arguments(*t);
        } else if ((cur().kind == K::name || cur().kind == K::string || cur().kind == K::integer ||
                    cur().kind == K::floating || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) fail(cur(), "You cannot chain multiple tests with is");
          t->items.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = call(at, std::move(e), Expr::Kind::call);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> tokens_;
  std::string file_;
  size_t at_ = 0;
};

}  // namespace

std::unique_ptr<Program> parse(const std::string& source, const std::string& file) {
  return Parser(tokenize(source, file), file).run();
}

}  // namespace mt::jinja
