// Preference pairs (dataset_info.json "ranking": true) -> pair Examples (data/batch.h: chosen in input_ids / labels,
// rejected in rejected_ids / rejected_labels). Text pairs follow LLaMA-Factory: alpaca records give the prompt
// (prompt, query, history, system, tools) and the chosen / rejected response strings; sharegpt records the
// conversation up to a prompt and the chosen / rejected messages; each is rendered by the chat template and cut as
// PairwiseDatasetProcessor cuts it. Tokenized pairs carry LLaMA-Factory's processed columns chosen_input_ids,
// chosen_labels, rejected_input_ids, rejected_labels.
// Invariant: a pair's two sequences share the prompt's tokens, labels are −100 on the prompt, each has at most
// max_seq_len tokens; a response that is empty or a chosen equal to its rejected raises mt::Error naming file:line.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/dataset_registry.h"
#include "data/formats/text_loader.h"
#include "data/templates/template_renderer.h"

namespace mt {

// Prompt ids (every turn before the last answer) and the last answer's ids, as LLaMA-Factory's encode_oneturn.
std::pair<std::vector<int32_t>, std::vector<int32_t>> one_turn(const std::vector<EncodedPair>& pairs);

// LLaMA-Factory's pair truncation: (source, target) = infer_seqlen(|prompt|, max(|chosen|, |rejected|), cutoff);
// the prompt keeps its first source tokens, each response its first target tokens. *truncated when any was cut.
Example assemble_pair(const std::vector<int32_t>& prompt, const std::vector<int32_t>& chosen,
                      const std::vector<int32_t>& rejected, int64_t cutoff, bool* truncated);

std::vector<Example> load_pairwise_text(const DatasetEntry& entry, const TemplateRenderer& renderer,
                                        const TextLimits& limits, DatasetStats* stats);
std::vector<Example> load_pairwise_tokenized(const DatasetEntry& entry, int64_t vocab_size, int64_t max_seq_len,
                                             DatasetStats* stats);

}  // namespace mt
