// KTO's unpaired examples (dataset_info.json columns.kto_tag, training.stage kto) -> KTO Examples (data/batch.h:
// the completion in input_ids / labels, the tag in desirable, the KL sequence in kl_ids / kl_labels). Text records
// (alpaca, sharegpt) are an SFT record plus a boolean kto_tag column (true: desirable); as LLaMA-Factory, every text
// dataset's records (each dataset's first max_samples) are merged in order before the KL shift, which its
// FeedbackDatasetProcessor runs over the merged dataset: each record is rendered as encode_oneturn of its conversation
// (efficient EOS appended), and its KL sequence as the same prompt with the previous record's last answer of the merged
// list (the first record of each block of kKtoShiftBlock records takes the block's last: the "+1 offset" LLaMA-Factory
// applies per map batch), a dataset's first record thus taking the previous dataset's last answer; each cut by
// infer_seqlen on its own. Records that are no conversation are skipped (as the SFT loader does) and take no part in
// the shift. Tokenized records carry LLaMA-Factory's processed columns input_ids, labels, kl_input_ids, kl_labels and
// the tag (columns.kto_tag).
// Invariant: a completion and its KL sequence share the prompt's tokens, labels are −100 on the prompt, each has at
// most max_seq_len tokens; a kto_tag missing or not boolean, or an empty answer, raises mt::Error naming file:line and
// the value.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/dataset_registry.h"
#include "data/formats/conversation.h"
#include "data/formats/text_loader.h"
#include "data/templates/template_renderer.h"

namespace mt {

// LLaMA-Factory's preprocessing_batch_size default: the blocks its KL shift runs in (dataset.preprocessing_batch_size
// sets another).
constexpr int64_t kKtoShiftBlock = 1000;

// A text KTO record converted, before the KL shift: its conversation, its tag and its place ("dataset 'x': file:line").
struct KtoRecord {
  Conversation conversation;
  bool desirable = false;
  std::string where;
};

// The records of a text KTO dataset in file order (its first `max_records` where > 0, as LLaMA-Factory's max_samples
// selects them), converted; those that are no conversation skipped, counted in stats->skipped and warned about once.
std::vector<KtoRecord> read_kto_records(const DatasetEntry& entry, int64_t max_records, DatasetStats* stats);

// The KTO examples of records [first, first + count) of `merged` (every text dataset's records, in order): each with its
// KL sequence from the previous record of `merged` (the block's last for a block's first; blocks of `block` records),
// rendered and cut; those with no trained token dropped; counted in *stats.
std::vector<Example> shifted_kto_examples(const std::vector<KtoRecord>& merged, size_t first, size_t count,
                                          int64_t block, const TemplateRenderer& renderer, const TextLimits& limits,
                                          DatasetStats* stats);
std::vector<Example> load_kto_tokenized(const DatasetEntry& entry, int64_t vocab_size, int64_t max_seq_len,
                                        DatasetStats* stats);

}  // namespace mt
