// Turn pairs -> one training Example within max_seq_len (whole-turn truncation, label masks).
// Invariant: the result has at most max_seq_len tokens and labels.size() == input_ids.size().
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "data/batch.h"
#include "data/templates/template_renderer.h"

namespace mt {

// LLaMA-Factory's infer_seqlen: (source, target) lengths after fitting both into `cutoff` tokens.
std::pair<int64_t, int64_t> infer_seqlen(int64_t source_len, int64_t target_len, int64_t cutoff);

// Whole turn pairs are kept from the start while they fit; the first pair that does not fit is dropped with every
// pair after it, unless it is the very first pair, which is then cut with infer_seqlen (prompt and response keep
// their heads). Labels are -100 on prompts unless train_on_prompt. *truncated is set when any token was cut.
// efficient_eos (LLaMA-Factory's efficient_eos templates; TemplateRenderer::efficient_eos()): that EOS id ends the
// example, as input and label, within max_seq_len, and every prompt but the first has it as its first token's
// label. It cannot go with train_on_prompt (LLaMA-Factory refuses that too).
Example assemble_example(const std::vector<EncodedPair>& pairs, int64_t max_seq_len, bool train_on_prompt,
                         bool* truncated, std::optional<int32_t> efficient_eos = std::nullopt);

}  // namespace mt
