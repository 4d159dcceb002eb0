// Chunked attention (Llama 4): the chunk ids the engine builds, and attention over them (as segments, the window at
// the chunk) equal to attention under transformers' chunked mask — query i sees key j iff both lie in one example,
// j <= i and position(j) / chunk == position(i) / chunk — written out here by brute force.
#include <cmath>
#include <limits>
#include <vector>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"
#include "engine/chunked_attention.h"

namespace {

// Rows of `seq` tokens: every example's positions 0..n−1, examples back to back, the rest of a row padding.
struct Packed {
  std::vector<int32_t> positions, example, lens;
};
Packed pack_rows(const std::vector<std::vector<int64_t>>& rows, int64_t seq) {
  Packed p;
  int32_t id = 0;
  for (const auto& row : rows) {
    int64_t used = 0;
    for (const int64_t n : row) {
      for (int64_t k = 0; k < n; ++k) {
        p.positions.push_back(static_cast<int32_t>(k));
        p.example.push_back(id);
      }
      used += n;
      ++id;
    }
    p.lens.push_back(static_cast<int32_t>(used));
    for (; used < seq; ++used) {
      p.positions.push_back(0);
      p.example.push_back(-1);
    }
  }
  return p;
}

}  // namespace

TEST_CASE("chunk ids: the row index of each token's chunk start, per packed example", "[engine][llama4]") {
  // One row, one example of 10 tokens, chunks of 4: starts 0, 4, 8.
  CHECK(mt::chunk_segment_ids({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 10, 4) ==
        std::vector<int32_t>{0, 0, 0, 0, 4, 4, 4, 4, 8, 8});
  // Two examples of 6 and 3 packed in a row of 10 (one padding token): the second's chunk starts at its own start.
  CHECK(mt::chunk_segment_ids({0, 1, 2, 3, 4, 5, 0, 1, 2, 0}, 10, 4) ==
        std::vector<int32_t>{0, 0, 0, 0, 4, 4, 6, 6, 6, 9});
  // Two rows: ids are row indices.
  CHECK(mt::chunk_segment_ids({0, 1, 2, 3, 4, 0, 1, 2, 3, 4}, 5, 2) == std::vector<int32_t>{0, 0, 2, 2, 4, 0, 0, 2, 2, 4});
  // No position reaches a chunk boundary: no ids (the examples are the chunks).
  CHECK(mt::chunk_segment_ids({0, 1, 2, 0, 1, 2}, 6, 8).empty());
}

TEST_CASE("attention over chunk ids with the window at the chunk is transformers' chunked attention",
          "[engine][llama4]") {
  const int64_t seq = 23, heads = 2, kv_heads = 1, hd = 8, chunk = 5;
  const Packed p = pack_rows({{23}, {7, 11, 3}, {12}}, seq);
  const int64_t batch = static_cast<int64_t>(p.lens.size()), T = batch * seq;
  const std::vector<int32_t> ids = mt::chunk_segment_ids(p.positions, seq, chunk);
  REQUIRE(!ids.empty());
  const auto q = mt::test::random_floats(T * heads * hd, 1), k = mt::test::random_floats(T * kv_heads * hd, 2);
  const auto v = mt::test::random_floats(T * kv_heads * hd, 3);
  auto be = mt::make_cpu_backend();
  mt::AttnShape s{.batch = batch, .seq = seq, .n_heads = heads, .n_kv_heads = kv_heads, .head_dim = hd,
                  .window = chunk};
  s.seq_lens = p.lens.data();
  s.segments = ids.data();
  std::vector<float> out(q.size()), lse(static_cast<size_t>(batch * heads * seq));
  be->attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);

  // Brute force under the chunked mask, in fp64.
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  double worst = 0.0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < p.lens[static_cast<size_t>(b)]; ++i) {
        const int64_t ti = b * seq + i;
        std::vector<double> w(static_cast<size_t>(seq), 0.0);
        double m = -std::numeric_limits<double>::infinity(), sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t tj = b * seq + j;
          if (p.example[static_cast<size_t>(tj)] != p.example[static_cast<size_t>(ti)] ||
              p.positions[static_cast<size_t>(tj)] / chunk != p.positions[static_cast<size_t>(ti)] / chunk)
            continue;
          double dot = 0.0;
          for (int64_t d = 0; d < hd; ++d) dot += static_cast<double>(q[(ti * heads + h) * hd + d]) * k[tj * hd + d];
          w[static_cast<size_t>(j)] = dot * scale;
          m = std::max(m, dot * scale);
        }
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t tj = b * seq + j;
          const bool seen = p.example[static_cast<size_t>(tj)] == p.example[static_cast<size_t>(ti)] &&
                            p.positions[static_cast<size_t>(tj)] / chunk == p.positions[static_cast<size_t>(ti)] / chunk;
          w[static_cast<size_t>(j)] = seen ? std::exp(w[static_cast<size_t>(j)] - m) : 0.0;
          sum += w[static_cast<size_t>(j)];
        }
        for (int64_t d = 0; d < hd; ++d) {
          double o = 0.0;
          for (int64_t j = 0; j <= i; ++j) o += w[static_cast<size_t>(j)] / sum * v[(b * seq + j) * hd + d];
          worst = std::max(worst, std::abs(o - out[(ti * heads + h) * hd + d]));
        }
      }
  CHECK(worst < 1e-5);
}
