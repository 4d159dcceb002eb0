// Chunked attention's key groups (see chunked_attention.h).
#include "engine/chunked_attention.h"

#include <algorithm>

#include "core/error.h"

namespace mt {

int64_t attention_chunk(const ModelSpec& spec) {
  int64_t chunk = 0;
  for (const LayerSpec& l : spec.layers) {
    if (l.attention.chunk == 0 || l.linear_mixer()) continue;
    MT_ASSERT(chunk == 0 || chunk == l.attention.chunk, "chunked layers of sizes {} and {}", chunk, l.attention.chunk);
    chunk = l.attention.chunk;
  }
  return chunk;
}

std::vector<int32_t> chunk_segment_ids(const std::vector<int32_t>& positions, int64_t seq_len, int64_t chunk) {
  MT_ASSERT(chunk > 0 && seq_len > 0 && static_cast<int64_t>(positions.size()) % seq_len == 0);
  if (std::none_of(positions.begin(), positions.end(), [&](int32_t p) { return p >= chunk; })) return {};
  std::vector<int32_t> ids(positions.size());
  for (size_t t = 0; t < positions.size(); ++t) {
    const int64_t index = static_cast<int64_t>(t) % seq_len, into_chunk = positions[t] % chunk;
    ids[t] = static_cast<int32_t>(std::max<int64_t>(0, index - into_chunk));
  }
  return ids;
}

}  // namespace mt
