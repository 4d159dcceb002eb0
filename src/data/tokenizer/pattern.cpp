// Literal search with string_view::find; regexes through PCRE2 (UTF, UCP, JIT). Per-thread match data and JIT
// stack make matching thread-safe without locks.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/tokenizer/pattern.h"

#include <pcre2.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer/utf8.h"

namespace mt::tok {

struct CompiledRegex {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~CompiledRegex() { pcre2_code_free(code); }
};

namespace {

// Match data for one pair of offsets and a JIT stack large enough for long runs of backtracking.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

Pattern Pattern::literal(std::string text) {
  Pattern p;
  p.literal_ = std::move(text);
  return p;
}

Pattern Pattern::regex(const std::string& pattern, const std::string& where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  auto compiled = std::make_shared<CompiledRegex>();
  compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  MT_REQUIRE(compiled->code != nullptr, "{}: bad regex '{}': {} at offset {}", where, pattern, pcre2_message(error),
             offset);
  compiled->jit = pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE) == 0;
  Pattern p;
  p.regex_ = std::move(compiled);
  return p;
}

Pattern Pattern::from_json(const nlohmann::json& j, const std::string& where) {
  if (j.is_object() && j.contains("String") && j["String"].is_string()) return literal(j["String"].get<std::string>());
  if (j.is_object() && j.contains("Regex") && j["Regex"].is_string())
    return regex(j["Regex"].get<std::string>(), where);
  throw Error(fmt::format("{}: expected {{\"String\": ...}} or {{\"Regex\": ...}}, got {}", where, j.dump()));
}

std::vector<std::pair<size_t, size_t>> Pattern::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  if (!regex_) {
    if (literal_.empty()) return matches;
    for (size_t at = text.find(literal_); at != std::string_view::npos; at = text.find(literal_, at + literal_.size()))
      matches.emplace_back(at, at + literal_.size());
    return matches;
  }
  MatchState& state = match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
  size_t pos = 0;
  while (pos <= text.size()) {
    const int rc = regex_->jit
                       ? pcre2_jit_match(regex_->code, subject, text.size(), pos, 0, state.data, state.context)
                       : pcre2_match(regex_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, state.data,
                                     state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    MT_REQUIRE(rc >= 0, "tokenizer regex failed on a text of {} bytes: {}", text.size(), pcre2_message(rc));
    const size_t begin = ovector[0], end = ovector[1];
    if (end == begin) {  // an empty match splits nothing: step over one character
      pos = begin < text.size() ? begin + std::max<size_t>(1, utf8_sequence_length(text, begin)) : text.size() + 1;
      continue;
    }
    matches.emplace_back(begin, end);
    pos = end;
  }
  return matches;
}

std::string Pattern::replace_all(std::string_view text, std::string_view content) const {
  std::string out;
  out.reserve(text.size());
  size_t last = 0;
  for (const auto& [begin, end] : find_all(text)) {
    out.append(text.substr(last, begin - last));
    out.append(content);
    last = end;
  }
  out.append(text.substr(last));
  return out;
}

}  // namespace mt::tok
