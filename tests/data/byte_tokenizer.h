// ByteTokenizer: a test double of mt::Tokenizer whose ids are readable — one id per byte (id = byte value), and the
// special tokens <s> </s> <|im_start|> <|im_end|> <|endoftext|> as ids 256..260 wherever they are written.
// Invariant: decode(encode(text)) == text; bos <s> (256), eos </s> (257).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace mt::test {

class ByteTokenizer : public Tokenizer {
 public:
  static const std::vector<std::string>& specials() {
    static const std::vector<std::string> s = {"<s>", "</s>", "<|im_start|>", "<|im_end|>", "<|endoftext|>"};
    return s;
  }
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const override {
    std::vector<int32_t> ids;
    if (add_special_tokens) ids.push_back(256);
    for (size_t i = 0; i < text.size();) {
      bool special = false;
      for (size_t k = 0; k < specials().size() && !special; ++k) {
        if (text.substr(i).starts_with(specials()[k])) {
          ids.push_back(static_cast<int32_t>(256 + k));
          i += specials()[k].size();
          special = true;
        }
      }
      if (!special) ids.push_back(static_cast<unsigned char>(text[i++]));
    }
    return ids;
  }
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const override {
    std::string text;
    for (const int32_t id : ids) {
      if (id < 256) text += static_cast<char>(id);
      else if (!skip_special_tokens) text += specials().at(static_cast<size_t>(id - 256));
    }
    return text;
  }
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    for (size_t k = 0; k < specials().size(); ++k)
      if (specials()[k] == token) return static_cast<int32_t>(256 + k);
    return std::nullopt;
  }
  int64_t vocab_size() const override { return 256 + static_cast<int64_t>(specials().size()); }
  std::unique_ptr<Tokenizer> with_plain_special_tokens(const std::vector<std::string>&) const override {
    return std::make_unique<ByteTokenizer>();   // its specials have no strip rules
  }
  std::optional<int32_t> bos_id() const override { return 256; }
  std::optional<int32_t> eos_id() const override { return 257; }
  std::optional<int32_t> pad_id() const override { return std::nullopt; }
};

// The ids of `text` under ByteTokenizer (bytes, no specials).
inline std::vector<int32_t> bytes(const std::string& text) {
  std::vector<int32_t> ids;
  for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

}  // namespace mt::test
