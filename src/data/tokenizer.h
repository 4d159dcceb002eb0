// Tokenizer: a Hugging Face tokenizer.json (+ tokenizer_config.json) — byte-level BPE (GPT-2, Qwen2/2.5/3,
// Llama-3) and SentencePiece-style BPE (Llama-2, Mistral) — with added and special tokens.
// Invariant: encode/decode give the same ids/text as the `tokenizers` library for the same files.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mt {

// One Tokenizer may encode and decode from many threads at once. The model must be BPE (other model types, and
// components these checkpoints do not use, are load errors naming the type); tokenizer.json's "truncation" and
// "padding" are ignored: callers cut and pack sequences themselves.
class Tokenizer {
 public:
  // Reads dir/tokenizer.json and, when present, dir/tokenizer_config.json; throws mt::Error naming the file.
  static std::unique_ptr<Tokenizer> from_directory(const std::filesystem::path& dir);
  virtual ~Tokenizer() = default;

  // Special/added tokens written in `text` are recognised as themselves. add_special_tokens applies the
  // post-processor (e.g. Llama's BOS), as tokenizers' encode(text, add_special_tokens=True) does.
  // `text` that is not valid UTF-8 is first repaired: each maximal ill-formed subpart becomes U+FFFD, exactly
  // as Python's bytes.decode("utf-8", "replace") (tokenizers itself only accepts str).
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const = 0;
  // Bytes of byte-level or <0xNN> tokens that do not form UTF-8 become U+FFFD, as in tokenizers; an id with no
  // token throws mt::Error (tokenizers silently drops it).
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual int64_t vocab_size() const = 0;  // highest id + 1, added tokens included

  // This tokenizer with `tokens` (contents of its added tokens; any other text is skipped) turned into special
  // tokens without lstrip / rstrip / single_word, found in the raw text: what transformers' add_special_tokens makes
  // of a token it is given as a string, as LLaMA-Factory does with a chat template's stop words.
  virtual std::unique_ptr<Tokenizer> with_plain_special_tokens(const std::vector<std::string>& tokens) const = 0;

  // From tokenizer_config.json (bos_token, eos_token, pad_token); nullopt where absent.
  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
  virtual std::optional<int32_t> pad_id() const = 0;
};

}  // namespace mt
