// Pre-tokenizer implementations. Splitting follows tokenizers' NormalizedString::split: the text is cut into
// alternating match / non-match spans, the behavior decides which spans join or vanish.
#include "data/tokenizer/pre_tokenizers.h"

#include <vector>

#include "core/error.h"
#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/json_fields.h"
#include "data/tokenizer/pattern.h"

namespace mt::tok {
namespace {

enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

struct Span {
  size_t begin, end;
  bool flag;  // is a match (before the behavior), is removed (after)
};

// Alternating spans covering `text`: the matches of `pattern` (flag true, or false when inverted) and the gaps.
std::vector<Span> match_spans(const std::string& text, const Pattern& pattern, bool invert) {
  std::vector<Span> spans;
  size_t last = 0;
  for (const auto& [begin, end] : pattern.find_all(text)) {
    if (begin > last) spans.push_back({last, begin, invert});
    spans.push_back({begin, end, !invert});
    last = end;
  }
  if (last < text.size()) spans.push_back({last, text.size(), invert});
  return spans;
}

// The spans to keep or remove once `behavior` joined them.
std::vector<Span> apply_behavior(std::vector<Span> spans, SplitBehavior behavior) {
  std::vector<Span> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::removed:
      return spans;
    case SplitBehavior::isolated:
      for (Span& s : spans) s.flag = false;
      return spans;
    case SplitBehavior::contiguous:
      for (const Span& s : spans) {
        if (s.flag == previous_match && !out.empty()) out.back().end = s.end;
        else out.push_back({s.begin, s.end, false});
        previous_match = s.flag;
      }
      return out;
    case SplitBehavior::merged_with_previous:
      for (const Span& s : spans) {
        if (s.flag && !previous_match && !out.empty()) out.back().end = s.end;
        else out.push_back({s.begin, s.end, false});
        previous_match = s.flag;
      }
      return out;
    case SplitBehavior::merged_with_next:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->flag && !previous_match && !out.empty()) out.back().begin = it->begin;
        else out.push_back({it->begin, it->end, false});
        previous_match = it->flag;
      }
      return {out.rbegin(), out.rend()};
  }
  return out;
}

void split_pieces(std::vector<PreToken>& pieces, const Pattern& pattern, SplitBehavior behavior, bool invert) {
  std::vector<PreToken> out;
  out.reserve(pieces.size());
  for (const PreToken& piece : pieces)
    for (const Span& s : apply_behavior(match_spans(piece.text, pattern, invert), behavior))
      if (!s.flag && s.end > s.begin)
        out.push_back({piece.text.substr(s.begin, s.end - s.begin), piece.at_text_start && s.begin == 0});
  pieces = std::move(out);
}

SplitBehavior parse_behavior(const std::string& name, const std::string& where) {
  if (name == "Removed") return SplitBehavior::removed;
  if (name == "Isolated") return SplitBehavior::isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (name == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (name == "Contiguous") return SplitBehavior::contiguous;
  throw Error(fmt::format("{}: unknown split behavior '{}'", where, name));
}

class Split final : public PreTokenizer {
 public:
  Split(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    split_pieces(pieces, pattern_, behavior_, invert_);
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// GPT-2's word regex, which ByteLevel applies when use_regex is true.
const Pattern& gpt2_pattern() {
  static const Pattern p = Pattern::regex(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", "ByteLevel pre-tokenizer");
  return p;
}

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    if (add_prefix_space_)
      for (PreToken& p : pieces)
        if (!p.text.empty() && p.text[0] != ' ') p.text.insert(p.text.begin(), ' ');
    if (use_regex_) split_pieces(pieces, gpt2_pattern(), SplitBehavior::isolated, false);
    std::string mapped;
    for (PreToken& p : pieces) {
      mapped.clear();
      append_byte_level(mapped, p.text);
      p.text.swap(mapped);
    }
  }

 private:
  bool add_prefix_space_, use_regex_;
};

enum class PrependScheme { always, first, never };

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), space_(Pattern::literal(" ")), marker_(Pattern::literal(replacement_)),
        scheme_(scheme), split_(split) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    for (PreToken& p : pieces) {
      p.text = space_.replace_all(p.text, replacement_);
      const bool prepend = scheme_ == PrependScheme::always || (scheme_ == PrependScheme::first && p.at_text_start);
      if (prepend && !p.text.starts_with(replacement_)) p.text.insert(0, replacement_);
    }
    if (split_) split_pieces(pieces, marker_, SplitBehavior::merged_with_next, false);
  }

 private:
  std::string replacement_;
  Pattern space_, marker_;
  PrependScheme scheme_;
  bool split_;
};

class Digits final : public PreTokenizer {
 public:
  explicit Digits(bool individual)
      : digits_(Pattern::regex(individual ? R"(\p{N})" : R"(\p{N}+)", "Digits pre-tokenizer")) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    split_pieces(pieces, digits_, SplitBehavior::isolated, false);
  }

 private:
  Pattern digits_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    for (const auto& step : steps_) step->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// prepend_scheme, or the older add_prefix_space flag it replaced (true meant "always").
PrependScheme parse_prepend_scheme(const nlohmann::json& j, const std::string& where) {
  const std::optional<std::string> scheme = optional_string(j, "prepend_scheme", where);
  if (!scheme) return bool_field(j, "add_prefix_space", true, where) ? PrependScheme::always : PrependScheme::never;
  if (*scheme == "always") return PrependScheme::always;
  if (*scheme == "first") return PrependScheme::first;
  if (*scheme == "never") return PrependScheme::never;
  throw Error(fmt::format("{}: unknown prepend_scheme '{}'", child(where, "prepend_scheme"), *scheme));
}

}  // namespace

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_field(j, where);
  if (type == "Split")
    return std::make_unique<Split>(Pattern::from_json(required_field(j, "pattern", where), child(where, "pattern")),
                                   parse_behavior(string_field(j, "behavior", where), child(where, "behavior")),
                                   bool_field(j, "invert", false, where));
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(bool_field(j, "add_prefix_space", true, where),
                                       bool_field(j, "use_regex", true, where));
  if (type == "Metaspace")
    return std::make_unique<Metaspace>(string_field(j, "replacement", where), parse_prepend_scheme(j, where),
                                       bool_field(j, "split", true, where));
  if (type == "Digits") return std::make_unique<Digits>(bool_field(j, "individual_digits", false, where));
  if (type == "Sequence") {
    const std::string list = child(where, "pretokenizers");
    const nlohmann::json& items = required_field(j, "pretokenizers", where);
    MT_REQUIRE(items.is_array(), "{}: expected an array", list);
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < items.size(); ++i)
      if (auto step = parse_pre_tokenizer(items[i], child(list, i))) steps.push_back(std::move(step));
    return std::make_unique<Sequence>(std::move(steps));
  }
  throw Error(fmt::format(
      "{}: unsupported pre_tokenizer type '{}' (supported: Sequence, Split, ByteLevel, Metaspace, Digits)", where,
      type));
}

}  // namespace mt::tok
