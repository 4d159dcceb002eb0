// Added-token search: at each position the longest pattern starting there (a walk down a byte trie), then
// tokenizers' find_matches rules; word and space classes of Rust's char (Alphabetic or Numeric, White_Space)
// come from ICU.
#include "data/tokenizer/added_tokens.h"

#include <unicode/uchar.h>

#include <algorithm>

#include "data/tokenizer/normalizers.h"
#include "data/tokenizer/utf8.h"

namespace mt::tok {
namespace {

bool is_word_char(char32_t c) {
  if (u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC)) return true;
  const int8_t type = u_charType(static_cast<UChar32>(c));
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

bool is_space(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)); }

// Byte offset where the character ending at `end` begins.
size_t previous_char(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = previous_char(s, s.size());
  return is_word_char(next_code_point(s, i));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  return is_word_char(next_code_point(s, i));
}

// Where the run of white space that ends `s` begins.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t i = previous_char(s, end);
    const size_t begin = i;
    if (!is_space(next_code_point(s, i))) break;
    end = begin;
  }
  return end;
}

// Bytes of white space that begin `s`.
size_t leading_space_length(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t next = i;
    if (!is_space(next_code_point(s, next))) break;
    i = next;
  }
  return i;
}

}  // namespace

void AddedVocabulary::Matcher::add(const std::string& pattern, size_t token) {
  if (pattern.empty()) return;
  uint32_t node = 0;
  for (const char c : pattern) {
    const auto byte = static_cast<uint8_t>(c);
    uint32_t next = child(node, byte);
    if (next == 0) {
      next = static_cast<uint32_t>(nodes_.size());
      nodes_[node].next.emplace_back(byte, next);
      nodes_.emplace_back();
    }
    node = next;
  }
  if (nodes_[node].token < 0) nodes_[node].token = static_cast<int64_t>(token);
  starts_[static_cast<uint8_t>(pattern[0])] = true;
}

uint32_t AddedVocabulary::Matcher::child(uint32_t node, uint8_t byte) const {
  for (const auto& [b, next] : nodes_[node].next)
    if (b == byte) return next;
  return 0;
}

bool AddedVocabulary::Matcher::find(std::string_view text, size_t from, size_t& begin, size_t& length,
                                    size_t& token) const {
  for (size_t at = from; at < text.size(); ++at) {
    if (!starts_[static_cast<uint8_t>(text[at])]) continue;
    int64_t best = -1;
    uint32_t node = 0;
    for (size_t i = at; i < text.size() && (node = child(node, static_cast<uint8_t>(text[i]))) != 0; ++i)
      if (nodes_[node].token >= 0) {
        best = nodes_[node].token;
        length = i + 1 - at;
      }
    if (best >= 0) {
      begin = at;
      token = static_cast<size_t>(best);
      return true;
    }
  }
  return false;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)), texts_(tokens_.size()) {
  // tokenizers builds its searches from the special tokens first, then the others.
  std::vector<size_t> order(tokens_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(), [&](size_t i) { return tokens_[i].special; });
  for (const size_t i : order) {
    const AddedToken& t = tokens_[i];
    index_of_id_.emplace(t.id, i);
    id_of_content_.emplace(t.content, t.id);
    if (t.special) special_contents_.insert(t.content);
    texts_[i] = t.content;
    if (!t.normalized) {
      raw_.add(t.content, i);
    } else {
      if (normalizer) normalizer->normalize(texts_[i]);
      normalized_.add(texts_[i], i);
    }
  }
}

std::vector<TextSegment> AddedVocabulary::split(std::string_view text, bool normalized_pass) const {
  const Matcher& m = normalized_pass ? normalized_ : raw_;
  std::vector<TextSegment> segments;
  size_t done = 0;  // end of the last emitted segment
  size_t search = 0;
  size_t begin = 0, length = 0, index = 0;
  while (m.find(text, search, begin, length, index)) {
    const AddedToken& token = tokens_[index];
    size_t end = begin + length;
    search = end;  // the next search starts after this match, even when the rules discard it
    if (token.single_word && (ends_with_word(text.substr(0, begin)) || starts_with_word(text.substr(end)))) continue;
    if (token.lstrip) begin = std::max(trailing_space_start(text.substr(0, begin)), done);
    if (token.rstrip) end += leading_space_length(text.substr(end));
    if (done < begin) segments.push_back({done, begin, -1});
    segments.push_back({begin, end, token.id});
    done = end;
  }
  if (done < text.size()) segments.push_back({done, text.size(), -1});
  return segments;
}

const std::string* AddedVocabulary::text_of(int32_t id) const {
  const auto it = index_of_id_.find(id);
  return it == index_of_id_.end() ? nullptr : &texts_[it->second];
}

std::optional<int32_t> AddedVocabulary::id_of(std::string_view content) const {
  const auto it = id_of_content_.find(std::string(content));
  if (it == id_of_content_.end()) return std::nullopt;
  return it->second;
}

bool AddedVocabulary::is_special(std::string_view content) const {
  return special_contents_.contains(std::string(content));
}

int32_t AddedVocabulary::id_limit() const {
  int32_t limit = 0;
  for (const AddedToken& t : tokens_) limit = std::max(limit, t.id + 1);
  return limit;
}

}  // namespace mt::tok
