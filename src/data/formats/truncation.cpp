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
                         bool* truncated, std::optional<int32_t> efficient_eos) {
  MT_ASSERT(max_seq_len > 0 && !pairs.empty());
  MT_ASSERT(!(train_on_prompt && efficient_eos), "efficient_eos templates do not support train_on_prompt");
  Example e;
  *truncated = false;
  const int64_t room = max_seq_len - (efficient_eos ? 1 : 0);   // the closing EOS is always kept
  auto add = [&](const std::vector<int32_t>& ids, size_t n, bool trained) {
    e.input_ids.insert(e.input_ids.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
    if (trained) e.labels.insert(e.labels.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
    else e.labels.insert(e.labels.end(), n, kIgnoreIndex);
  };
  auto add_prompt = [&](const std::vector<int32_t>& ids, size_t n, size_t index) {
    const size_t at = e.labels.size();
    add(ids, n, train_on_prompt);
    if (efficient_eos && index > 0 && n > 0) e.labels[at] = *efficient_eos;   // the previous answer ends here
  };
  for (size_t i = 0; i < pairs.size(); ++i) {
    const EncodedPair& p = pairs[i];
    const auto used = static_cast<int64_t>(e.input_ids.size());
    const auto prompt = static_cast<int64_t>(p.prompt.size()), response = static_cast<int64_t>(p.response.size());
    if (used + prompt + response <= room) {
      add_prompt(p.prompt, p.prompt.size(), i);
      add(p.response, p.response.size(), true);
      continue;
    }
    *truncated = true;
    if (i == 0) {
      const auto [source, target] = infer_seqlen(prompt, response, room);
      add_prompt(p.prompt, static_cast<size_t>(source), i);
      add(p.response, static_cast<size_t>(target), true);
    }
    break;
  }
  if (efficient_eos) {
    e.input_ids.push_back(*efficient_eos);
    e.labels.push_back(*efficient_eos);
  }
  return e;
}

}  // namespace mt
