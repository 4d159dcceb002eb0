// Loader for formatting "tokenized": records of token ids (and optional labels) in a .json array or .jsonl file.
// Invariant: returned Examples have ids in [0, vocab_size), labels in that range or -100, at most max_seq_len
// tokens and at least one trained target after the shift; they keep the file's order.
#pragma once
#include <cstdint>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/dataset_registry.h"

namespace mt {

// Reads entry.file: {"input_ids": [...], "labels": [...]} per record (entry.columns may rename both keys);
// missing labels train on every token. Bad records raise mt::Error naming "file:line" (or "file: element N"
// for a JSON array). Adds this file's counts to *stats.
std::vector<Example> load_tokenized(const DatasetEntry& entry, int64_t vocab_size, int64_t max_seq_len,
                                    DatasetStats* stats);

}  // namespace mt
