// Chunked attention (Llama 4's attention_chunk_size) as the attention op's segments: a query sees the keys of its own
// chunk of positions within its packed example, i.e. the keys that share its (example, position / chunk), which is one
// id per token; with the window at most the chunk (no visible key is further back), the attention kernels skip the
// tiles beyond it. The engine builds the ids once per batch; attention_block.cpp passes them for chunked layers.
// Invariant: ids are the row index of the first token of the token's chunk, so two tokens of a row share an id iff they
// lie in the same example and the same chunk (positions restart at 0 in every packed example and rise by 1).
#pragma once
#include <cstdint>
#include <vector>

#include "model/model_spec.h"

namespace mt {

// The chunk size of the model's chunked layers (all share one), 0 without any.
int64_t attention_chunk(const ModelSpec& spec);
// Per token of a [rows, seq_len] batch, its chunk's id; empty where no position reaches `chunk` (the chunks are then
// the examples themselves, which the batch's segments already separate).
std::vector<int32_t> chunk_segment_ids(const std::vector<int32_t>& positions, int64_t seq_len, int64_t chunk);

}  // namespace mt
