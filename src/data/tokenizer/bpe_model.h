// The BPE model of tokenizer.json: vocab, ranked merges, byte_fallback (<0xNN> tokens), unk_token/fuse_unk and
// ignore_merges (Llama-3). Invariant: tokenize(word) gives the ids `tokenizers` gives for the same word: merges
// applied lowest rank first, leftmost first among equal ranks, in O(n log n) for a word of n characters.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/tokenizer/merge_table.h"
#include "data/tokenizer/word_cache.h"

namespace mt::tok {

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object, `where` names it in errors.
  BpeModel(const nlohmann::json& model, const std::string& where);

  // Appends the ids of one pre-token to `out`.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // nullptr when no token has this id.
  const std::string* id_to_token(int32_t id) const;
  int64_t id_limit() const { return static_cast<int64_t>(tokens_.size()); }  // highest id + 1

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::vector<std::string> tokens_;  // by id; "" where no token has the id
  std::vector<bool> has_token_;
  MergeTable merges_{0};
  std::array<int32_t, 256> byte_ids_{};  // byte_fallback: id of <0xNN>, or -1
  std::array<int32_t, 128> ascii_ids_{};  // id of each one-byte character, or -1 (saves a hash lookup)
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool fuse_unk_ = false;
  int32_t unk_id_ = -1;
  WordCache cache_{1 << 16};
};

}  // namespace mt::tok
