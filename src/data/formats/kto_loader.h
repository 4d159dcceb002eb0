// KTO's unpaired examples (dataset_info.json columns.kto_tag, training.stage kto) -> KTO Examples (data/batch.h:
// the completion in input_ids / labels, the tag in desirable, the KL sequence in kl_ids / kl_labels). Text records
// (alpaca, sharegpt) are an SFT record plus a boolean kto_tag column (true: desirable); each is rendered as
// LLaMA-Factory's FeedbackDatasetProcessor renders it: encode_oneturn of the conversation (efficient EOS appended),
// and its KL sequence the same prompt with the previous record's last answer (the first record of each block of
// kKtoShiftBlock records takes the block's last answer: the "+1 offset" LLaMA-Factory applies per map batch), each
// cut by infer_seqlen on its own. Records that are no conversation are skipped (as the SFT loader does) and take no
// part in the shift; LLaMA-Factory shifts over all datasets merged, we over each dataset. Tokenized records carry
// LLaMA-Factory's processed columns input_ids, labels, kl_input_ids, kl_labels and the tag (columns.kto_tag).
// Invariant: a completion and its KL sequence share the prompt's tokens, labels are −100 on the prompt, each has at
// most max_seq_len tokens; a kto_tag missing or not boolean, or an empty answer, raises mt::Error naming file:line and
// the value.
#pragma once
#include <cstdint>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/dataset_registry.h"
#include "data/formats/text_loader.h"
#include "data/templates/template_renderer.h"

namespace mt {

// LLaMA-Factory's preprocessing_batch_size default: the blocks its KL shift runs in.
constexpr int64_t kKtoShiftBlock = 1000;

std::vector<Example> load_kto_text(const DatasetEntry& entry, const TemplateRenderer& renderer,
                                   const TextLimits& limits, DatasetStats* stats);
std::vector<Example> load_kto_tokenized(const DatasetEntry& entry, int64_t vocab_size, int64_t max_seq_len,
                                        DatasetStats* stats);

}  // namespace mt
