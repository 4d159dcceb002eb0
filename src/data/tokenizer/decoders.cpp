// Decoder implementations, one class per tokenizers decoder type.
#include "data/tokenizer/decoders.h"

#include "core/error.h"
#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/json_fields.h"
#include "data/tokenizer/pattern.h"
#include "data/tokenizer/utf8.h"

namespace mt::tok {
namespace {

std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) out.push_back(next_code_point(s, i));
  return out;
}

std::string from_code_points(const std::vector<char32_t>& cs, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) append_utf8(out, cs[i]);
  return out;
}

// One string of all tokens' bytes; a token with a character outside the byte table contributes its UTF-8 as is.
class ByteLevel final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      const size_t mark = bytes.size();
      for (size_t i = 0; i < token.size();) {
        const int b = byte_for_char(next_code_point(token, i));
        if (b < 0) {
          bytes.resize(mark);
          bytes.append(token);
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
    }
    tokens.assign(1, to_valid_utf8(bytes));
  }
};

class Replace final : public Decoder {
 public:
  Replace(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) token = pattern_.replace_all(token, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// Runs of <0xNN> tokens become their bytes when these are UTF-8, else one U+FFFD per byte.
class ByteFallback final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t byte_tokens = 0;
    const auto flush = [&] {
      if (byte_tokens == 0) return;
      if (is_valid_utf8(bytes)) out.push_back(bytes);
      else out.insert(out.end(), byte_tokens, "\xEF\xBF\xBD");
      bytes.clear();
      byte_tokens = 0;
    };
    for (std::string& token : tokens) {
      if (const int b = byte_token(token); b >= 0) {
        bytes.push_back(static_cast<char>(b));
        ++byte_tokens;
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  // The byte of a "<0xNN>" token (hex digits of either case), or -1.
  static int byte_token(const std::string& t) {
    if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return -1;
    int value = 0;
    for (const char c : t.substr(3, 2)) {
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (digit < 0) return -1;
      value = value * 16 + digit;
    }
    return value;
  }
};

class Fuse final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& token : tokens) all += token;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from every token.
class Strip final : public Decoder {
 public:
  Strip(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      const std::vector<char32_t> cs = code_points(token);
      size_t begin = 0, end = cs.size();
      while (begin < std::min(start_, cs.size()) && cs[begin] == content_) ++begin;
      for (size_t k = 0; k < stop_ && end > 0 && cs[end - 1] == content_; ++k) --end;
      token = begin < end ? from_code_points(cs, begin, end) : std::string();
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

// The replacement character becomes a space; in the first token it is dropped unless prepend_scheme is never.
class Metaspace final : public Decoder {
 public:
  Metaspace(char32_t replacement, bool drop_in_first) : replacement_(replacement), drop_in_first_(drop_in_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t t = 0; t < tokens.size(); ++t) {
      std::string out;
      for (size_t i = 0; i < tokens[t].size();) {
        const char32_t c = next_code_point(tokens[t], i);
        if (c != replacement_) append_utf8(out, c);
        else if (t > 0 || !drop_in_first_) out.push_back(' ');
      }
      tokens[t] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  bool drop_in_first_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

char32_t single_char(const nlohmann::json& j, std::string_view key, const std::string& where) {
  const std::string s = string_field(j, key, where);
  const std::vector<char32_t> cs = code_points(to_valid_utf8(s));
  MT_REQUIRE(cs.size() == 1, "{}: expected one character, got \"{}\"", child(where, key), s);
  return cs[0];
}

size_t count_field(const nlohmann::json& j, std::string_view key, const std::string& where) {
  const int64_t n = int_field(j, key, where);
  MT_REQUIRE(n >= 0, "{}: expected a count >= 0, got {}", child(where, key), n);
  return static_cast<size_t>(n);
}

}  // namespace

std::unique_ptr<Decoder> parse_decoder(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_field(j, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "Replace")
    return std::make_unique<Replace>(Pattern::from_json(required_field(j, "pattern", where), child(where, "pattern")),
                                     string_field(j, "content", where));
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip")
    return std::make_unique<Strip>(single_char(j, "content", where), count_field(j, "start", where),
                                   count_field(j, "stop", where));
  if (type == "Metaspace") {
    // prepend_scheme, or the older add_prefix_space flag it replaced.
    const std::optional<std::string> scheme = optional_string(j, "prepend_scheme", where);
    const bool drop = scheme ? *scheme != "never" : bool_field(j, "add_prefix_space", true, where);
    return std::make_unique<Metaspace>(single_char(j, "replacement", where), drop);
  }
  if (type == "Sequence") {
    const std::string list = child(where, "decoders");
    const nlohmann::json& items = required_field(j, "decoders", where);
    MT_REQUIRE(items.is_array(), "{}: expected an array", list);
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < items.size(); ++i)
      if (auto step = parse_decoder(items[i], child(list, i))) steps.push_back(std::move(step));
    return std::make_unique<Sequence>(std::move(steps));
  }
  throw Error(fmt::format("{}: unsupported decoder type '{}' (supported: ByteLevel, Sequence, Replace, ByteFallback, "
                          "Fuse, Strip, Metaspace)", where, type));
}

}  // namespace mt::tok
