// tokenize: Jinja's root / block / variable / comment lexer states (see lexer.h).
#include "data/templates/jinja/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace mt::jinja {
namespace {

// \r\n and \r become \n; one trailing newline goes (keep_trailing_newline=False).
std::string normalise_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  Lexer(const std::string& source, const std::string& file) : src_(normalise_newlines(source)), file_(file) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const size_t start = next_tag(pos_);
      std::string text = src_.substr(pos_, start - pos_);
      const size_t text_at = pos_;
      if (start == src_.size()) {
        emit_text(text, text_at);
        break;
      }
      const char type = src_[start + 1];
      const char sign = start + 2 < src_.size() && (src_[start + 2] == '-' || src_[start + 2] == '+')
                            ? src_[start + 2] : '\0';
      if (sign == '-') {
        const size_t keep = text.find_last_not_of(" \t\n\v\f\r");
        text.resize(keep == std::string::npos ? 0 : keep + 1);
      } else if (sign != '+' && type != '{') {
        // lstrip_blocks: only spaces between the line's start and a block or comment tag go.
        const size_t line_at = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((line_at > 0 || line_starting) && text.find_first_not_of(" \t\v\f", line_at) == std::string::npos)
          text.resize(line_at);
      }
      emit_text(text, text_at);
      pos_ = start + 2 + (sign ? 1 : 0);
      if (type == '#') comment(start);
      else tag(type, start);
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({Token::Kind::end, "", line_of(src_.size()), column_of(src_.size())});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& message) const {
    throw Error(fmt::format("{}:{}:{}: {}", file_, line_of(at), column_of(at), message));
  }
  int line_of(size_t at) const {
    return static_cast<int>(std::upper_bound(line_starts_.begin(), line_starts_.end(), at) - line_starts_.begin());
  }
  int column_of(size_t at) const { return static_cast<int>(at - line_starts_[line_of(at) - 1]) + 1; }

  size_t next_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && std::strchr("{%#", src_[i + 1])) return i;
    return src_.size();
  }

  void emit_text(const std::string& text, size_t at) {
    if (!text.empty()) tokens_.push_back({Token::Kind::text, text, line_of(at), column_of(at)});
  }

  // After the end marker: `-` takes the following whitespace, `+` keeps everything, else trim_blocks takes one "\n"
  // after a block or comment (never after an output tag).
  void after_end(char sign, bool block = true) {
    if (sign == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (block && sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
  }

  void comment(size_t start) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail(start, "Missing end of comment tag");
    const char sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    pos_ = end + 2;
    after_end(sign);
  }

  void tag(char type, size_t start) {
    const bool output = type == '{';
    tokens_.push_back({output ? Token::Kind::output_begin : Token::Kind::block_begin, "", line_of(start),
                       column_of(start)});
    std::vector<char> brackets;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      if (pos_ >= src_.size()) fail(start, output ? "unexpected end of template, expected '}}'"
                                                  : "unexpected end of template, expected '%}'");
      if (brackets.empty()) {
        const char close = output ? '}' : '%';
        for (const char sign : {'-', '+', '\0'}) {
          if (sign == '+' && output) continue;
          const size_t at = pos_ + (sign ? 1 : 0);
          if ((!sign || src_[pos_] == sign) && src_.compare(at, 2, std::string{close, '}'}) == 0) {
            tokens_.push_back({output ? Token::Kind::output_end : Token::Kind::block_end, "", line_of(pos_),
                               column_of(pos_)});
            pos_ = at + 2;
            after_end(sign, !output);
            return;
          }
        }
      }
      inner_token(brackets);
    }
  }

  void inner_token(std::vector<char>& brackets) {
    const size_t at = pos_;
    const char c = src_[pos_];
    auto push = [&](Token::Kind kind, std::string text) {
      tokens_.push_back({kind, std::move(text), line_of(at), column_of(at)});
    };
    if (is_name_start(c)) {
      size_t end = pos_;
      while (end < src_.size() && (is_name_start(src_[end]) || is_digit(src_[end]))) ++end;
      push(Token::Kind::name, src_.substr(pos_, end - pos_));
      pos_ = end;
      return;
    }
    if (is_digit(c)) {
      size_t end = pos_;
      while (end < src_.size() && is_digit(src_[end])) ++end;
      bool floating = false;
      if (end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
        floating = true;
        ++end;
        while (end < src_.size() && is_digit(src_[end])) ++end;
      }
      if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
        size_t e = end + 1;
        if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
        if (e < src_.size() && is_digit(src_[e])) {
          floating = true;
          end = e;
          while (end < src_.size() && is_digit(src_[end])) ++end;
        }
      }
      push(floating ? Token::Kind::floating : Token::Kind::integer, src_.substr(pos_, end - pos_));
      pos_ = end;
      return;
    }
    if (c == '\'' || c == '"') {
      push(Token::Kind::string, string_literal(c));
      return;
    }
    static const char* const kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
    for (const char* op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        push(Token::Kind::op, op);
        pos_ += 2;
        return;
      }
    }
    if (!std::strchr("+-*/%~<>=()[]{},.:|", c) || c == '\0') fail(at, fmt::format("unexpected char '{}'", c));
    if (c == '(' || c == '[' || c == '{') brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) fail(at, fmt::format("unexpected '{}'", c));
      if (brackets.back() != c) fail(at, fmt::format("unexpected '{}', expected '{}'", c, brackets.back()));
      brackets.pop_back();
    }
    push(Token::Kind::op, std::string(1, c));
    ++pos_;
  }

  // A quoted string with Python's escapes; pos_ is at the opening quote.
  std::string string_literal(char quote) {
    const size_t start = pos_++;
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) fail(start, "unexpected end of string");
      const char c = src_[pos_++];
      if (c == quote) return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size()) fail(start, "unexpected end of string");
      const char e = src_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + digits > src_.size()) fail(start, "truncated \\" + std::string(1, e) + " escape");
          const std::string hex = src_.substr(pos_, digits);
          if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            fail(start, "truncated \\" + std::string(1, e) + " escape");
          append_utf8(out, static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
          pos_ += digits;
          break;
        }
        default:
          out += '\\';
          out += e;
      }
    }
  }

  std::string src_;
  std::string file_;
  std::vector<size_t> line_starts_;  // offset of each line's first character
  size_t pos_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const std::string& file) { return Lexer(source, file).run(); }

}  // namespace mt::jinja
