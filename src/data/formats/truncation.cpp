// Whole-turn truncation and label masking (see truncation.h for the rule).
// Invariant: a pair is either kept whole or not at all, except the first pair, which may be cut.
#include "data/formats/truncation.h"

#include <algorithm>

#include "core/error.h"

namespace mt {

std::pair<int64_t, int64_t> infer_seqlen(int64_t source_len, int64_t target_len, int64_t cutoff) {
  int64_t max_target;
  if (target_len * 2 < cutoff) max_target = cutoff;                  // only the source is cut
  else if (source_len * 2 < cutoff) max_target = cutoff - source_len;  // only the target is cut
  else max_target = static_cast<int64_t>(static_cast<double>(cutoff) * (static_cast<double>(target_len) /
                                                                         static_cast<double>(source_len + target_len)));
  const int64_t new_target = std::min(max_target, target_len);
  const int64_t new_source = std::min(std::max<int64_t>(cutoff - new_target, 0), source_len);
  return {new_source, new_target};
}

Example assemble_example(const std::vector<EncodedPair>& pairs, int64_t max_seq_len, bool train_on_prompt,
                         bool* truncated) {
  MT_ASSERT(max_seq_len > 0 && !pairs.empty());
  Example e;
  *truncated = false;
  auto add = [&](const std::vector<int32_t>& ids, size_t n, bool trained) {
    e.input_ids.insert(e.input_ids.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
    if (trained) e.labels.insert(e.labels.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
    else e.labels.insert(e.labels.end(), n, kIgnoreIndex);
  };
  for (size_t i = 0; i < pairs.size(); ++i) {
    const EncodedPair& p = pairs[i];
    const auto used = static_cast<int64_t>(e.input_ids.size());
    const auto prompt = static_cast<int64_t>(p.prompt.size()), response = static_cast<int64_t>(p.response.size());
    if (used + prompt + response <= max_seq_len) {
      add(p.prompt, p.prompt.size(), train_on_prompt);
      add(p.response, p.response.size(), true);
      continue;
    }
    *truncated = true;
    if (i == 0) {
      const auto [source, target] = infer_seqlen(prompt, response, max_seq_len);
      add(p.prompt, static_cast<size_t>(source), train_on_prompt);
      add(p.response, static_cast<size_t>(target), true);
    }
    break;
  }
  return e;
}

}  // namespace mt
