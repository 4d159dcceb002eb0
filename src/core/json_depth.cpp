// The JSON nesting scan (see json_depth.h).
#include "core/json_depth.h"

#include "core/error.h"

namespace mt {

void require_json_depth(std::string_view text, std::string_view source) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, a quote included
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      MT_REQUIRE(++depth <= kMaxNestingDepth, "{}: JSON nested deeper than {} levels (at byte {})", source,
                 kMaxNestingDepth, i);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

}  // namespace mt
