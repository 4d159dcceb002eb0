// The added vocabulary of tokenizer.json ("added_tokens"): special and other added tokens, found in the text
// before the model sees it and never split by BPE. Invariant: the matches of tokenizers' AddedVocabulary —
// leftmost-longest, then the single_word / lstrip / rstrip rules; tokens with normalized=false are found in the
// raw text, those with normalized=true in the normalized text (as the normalizer writes their content).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace mt::tok {

class Normalizer;

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// [begin, end) of the text: an added token (token >= 0) or plain text to encode (token == -1, never empty).
struct TextSegment {
  size_t begin, end;
  int32_t token;
};

class AddedVocabulary {
 public:
  // `normalizer` (may be null) writes the patterns of normalized tokens; it is not kept.
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // `text` cut at the tokens of the raw pass (normalized == false) or of the normalized pass.
  std::vector<TextSegment> split(std::string_view text, bool normalized_pass) const;
  // The token of `id` as decode sees it (tokenizers' id_to_token): its content, normalized when the token is
  // normalized; nullptr when `id` is not an added token.
  const std::string* text_of(int32_t id) const;
  std::optional<int32_t> id_of(std::string_view content) const;
  bool is_special(std::string_view content) const;
  int32_t id_limit() const;  // highest id + 1, 0 when empty
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie of the patterns; a walk from a position finds the longest pattern starting there.
  class Matcher {
   public:
    // `token` indexes tokens_; a repeated pattern keeps its first token.
    void add(const std::string& pattern, size_t token);
    // The first position >= from where a pattern starts, with the longest such pattern; false when none.
    bool find(std::string_view text, size_t from, size_t& begin, size_t& length, size_t& token) const;

   private:
    struct Node {
      std::vector<std::pair<uint8_t, uint32_t>> next;  // byte -> node
      int64_t token = -1;
    };
    uint32_t child(uint32_t node, uint8_t byte) const;  // 0: none (the root is never a child)
    std::vector<Node> nodes_{1};
    std::array<bool, 256> starts_{};  // bytes that begin some pattern
  };
  std::vector<AddedToken> tokens_;
  std::vector<std::string> texts_;  // by index into tokens_, see text_of
  std::unordered_map<int32_t, size_t> index_of_id_;
  std::unordered_map<std::string, int32_t> id_of_content_;
  std::unordered_set<std::string> special_contents_;
  Matcher raw_, normalized_;
};

}  // namespace mt::tok
