// The encode/decode pipeline of HfTokenizer and the assembly of its parts from the parsed JSON.
#include "data/tokenizer/hf_tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer/json_fields.h"
#include "data/tokenizer/utf8.h"

namespace mt::tok {
namespace {

std::vector<AddedToken> parse_added_tokens(const nlohmann::json& root, const std::string& file) {
  std::vector<AddedToken> tokens;
  const auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return tokens;
  const std::string where = child(file, "added_tokens");
  MT_REQUIRE(it->is_array(), "{}: expected an array", where);
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string at = child(where, i);
    const nlohmann::json& t = (*it)[i];
    AddedToken token;
    const int64_t id = int_field(t, "id", at);
    MT_REQUIRE(id >= 0 && id < (int64_t{1} << 30), "{}: bad id {}", child(at, "id"), id);
    token.id = static_cast<int32_t>(id);
    token.content = string_field(t, "content", at);
    token.special = bool_field(t, "special", false, at);
    token.single_word = bool_field(t, "single_word", false, at);
    token.lstrip = bool_field(t, "lstrip", false, at);
    token.rstrip = bool_field(t, "rstrip", false, at);
    token.normalized = bool_field(t, "normalized", !token.special, at);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

}  // namespace

HfTokenizer::HfTokenizer(const nlohmann::json& root, const std::string& file, const nlohmann::json& config,
                         const std::string& config_file) {
  MT_REQUIRE(root.is_object(), "{}: expected a JSON object at the top level", file);
  const std::string model_where = child(file, "model");
  const nlohmann::json& model = required_field(root, "model", file);
  const std::string type = model.is_object() && model.contains("type") ? type_field(model, model_where) : "BPE";
  MT_REQUIRE(type == "BPE", "{}: model type '{}' is not supported (only BPE: byte-level as in GPT-2, Llama-3 and "
             "Qwen, or SentencePiece-style as in Llama-2 and Mistral)", model_where, type);
  model_ = std::make_unique<BpeModel>(model, model_where);
  const auto section = [&](const char* key) -> const nlohmann::json& {
    static const nlohmann::json null_json;
    const auto it = root.find(key);
    return it == root.end() ? null_json : *it;
  };
  normalizer_ = parse_normalizer(section("normalizer"), child(file, "normalizer"));
  pre_tokenizer_ = parse_pre_tokenizer(section("pre_tokenizer"), child(file, "pre_tokenizer"));
  decoder_ = parse_decoder(section("decoder"), child(file, "decoder"));
  post_processor_ = parse_post_processor(section("post_processor"), child(file, "post_processor"));
  added_ = std::make_unique<AddedVocabulary>(parse_added_tokens(root, file), normalizer_.get());

  if (!config.is_null()) {
    MT_REQUIRE(config.is_object(), "{}: expected a JSON object at the top level", config_file);
    bos_ = special_id(config, "bos_token", config_file);
    eos_ = special_id(config, "eos_token", config_file);
    pad_ = special_id(config, "pad_token", config_file);
  }
}

// The id of tokenizer_config.json's `key`: a token string, an AddedToken object {"content": ...}, or null.
std::optional<int32_t> HfTokenizer::special_id(const nlohmann::json& config, const char* key,
                                               const std::string& file) const {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  const std::string where = child(file, key);
  const std::string token = it->is_string() ? it->get<std::string>() : string_field(*it, "content", where);
  const auto id = token_to_id(token);
  MT_REQUIRE(id, "{}: token \"{}\" is not in the vocabulary of tokenizer.json", where, token);
  return id;
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = to_valid_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  std::string piece;
  for (const TextSegment& raw : added_->split(text, /*normalized_pass=*/false)) {
    if (raw.token >= 0) {
      ids.push_back(raw.token);
      continue;
    }
    piece.assign(text.substr(raw.begin, raw.end - raw.begin));
    if (normalizer_) normalizer_->normalize(piece);
    for (const TextSegment& s : added_->split(piece, /*normalized_pass=*/true)) {
      if (s.token >= 0) ids.push_back(s.token);
      else encode_piece(std::string_view(piece).substr(s.begin, s.end - s.begin), raw.begin == 0 && s.begin == 0, ids);
    }
  }
  if (add_special_tokens && post_processor_) post_processor_->process(ids);
  return ids;
}

void HfTokenizer::encode_piece(std::string_view piece, bool at_text_start, std::vector<int32_t>& ids) const {
  if (!pre_tokenizer_) {
    model_->tokenize(piece, ids);
    return;
  }
  std::vector<PreToken> words{PreToken{std::string(piece), at_text_start}};
  pre_tokenizer_->pre_tokenize(words);
  for (const PreToken& w : words) model_->tokenize(w.text, ids);
}

std::string HfTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    const std::string* token = added_->text_of(id);
    if (!token) token = model_->id_to_token(id);
    MT_REQUIRE(token, "decode: token id {} is not in the vocabulary ({} ids)", id, vocab_size());
    if (skip_special_tokens && added_->is_special(*token)) continue;
    tokens.push_back(*token);
  }
  std::string text;
  if (!decoder_) {
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
    return text;
  }
  decoder_->decode_chain(tokens);
  for (const std::string& t : tokens) text += t;
  return text;
}

std::optional<int32_t> HfTokenizer::token_to_id(std::string_view token) const {
  if (const auto id = added_->id_of(token)) return id;
  return model_->token_to_id(token);
}

int64_t HfTokenizer::vocab_size() const { return std::max<int64_t>(model_->id_limit(), added_->id_limit()); }

std::unique_ptr<Tokenizer> HfTokenizer::with_plain_special_tokens(const std::vector<std::string>& tokens) const {
  std::vector<AddedToken> added = added_->tokens();
  for (AddedToken& t : added) {
    if (std::find(tokens.begin(), tokens.end(), t.content) == tokens.end()) continue;
    t.special = true;
    t.single_word = t.lstrip = t.rstrip = t.normalized = false;
  }
  auto copy = std::make_unique<HfTokenizer>(*this);
  copy->added_ = std::make_shared<const AddedVocabulary>(std::move(added), normalizer_.get());
  return copy;
}

}  // namespace mt::tok
