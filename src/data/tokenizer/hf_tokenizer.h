// mt::Tokenizer for a Hugging Face tokenizer.json with a BPE model. encode: invalid UTF-8 becomes U+FFFD, added
// tokens are cut out of the raw text, each remaining piece is normalized (normalized added tokens cut out again),
// pre-tokenized and BPE-encoded, then the post-processor adds special tokens on request. decode: tokens through
// the decoder. Invariant: the ids and text of `tokenizers` for the same files; immutable, so safe to share
// between threads (the word cache locks internally).
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "data/tokenizer.h"
#include "data/tokenizer/added_tokens.h"
#include "data/tokenizer/bpe_model.h"
#include "data/tokenizer/decoders.h"
#include "data/tokenizer/normalizers.h"
#include "data/tokenizer/post_processors.h"
#include "data/tokenizer/pre_tokenizers.h"

namespace mt::tok {

class HfTokenizer final : public Tokenizer {
 public:
  // `tokenizer` is tokenizer.json, `config` tokenizer_config.json (null when absent); the file names go into errors.
  HfTokenizer(const nlohmann::json& tokenizer, const std::string& tokenizer_file, const nlohmann::json& config,
              const std::string& config_file);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  int64_t vocab_size() const override;
  std::unique_ptr<Tokenizer> with_plain_special_tokens(const std::vector<std::string>& tokens) const override;
  std::optional<int32_t> bos_id() const override { return bos_; }
  std::optional<int32_t> eos_id() const override { return eos_; }
  std::optional<int32_t> pad_id() const override { return pad_; }

 private:
  // Pre-tokenizes and BPE-encodes one piece of normalized text without added tokens.
  void encode_piece(std::string_view piece, bool at_text_start, std::vector<int32_t>& ids) const;
  std::optional<int32_t> special_id(const nlohmann::json& config, const char* key, const std::string& file) const;

  // Shared with the tokenizers with_plain_special_tokens makes (all of them immutable).
  std::shared_ptr<const Normalizer> normalizer_;
  std::shared_ptr<const PreTokenizer> pre_tokenizer_;
  std::shared_ptr<const BpeModel> model_;
  std::shared_ptr<const Decoder> decoder_;
  std::shared_ptr<const PostProcessor> post_processor_;
  std::shared_ptr<const AddedVocabulary> added_;
  std::optional<int32_t> bos_, eos_, pad_;
};

}  // namespace mt::tok
