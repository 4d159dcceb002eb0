// Examples sent over MPI as flat int32 arrays (see example_broadcast.h).
#include "cli/train/example_broadcast.h"

#include <algorithm>
#include <cstdint>

#include "dist/check.h"

namespace mt {
namespace {

// MPI counts are int: send in pieces of at most 2^30 values.
void broadcast_ints(std::vector<int32_t>& values, MPI_Comm comm) {
  int64_t n = static_cast<int64_t>(values.size());
  MT_CHECK_MPI(MPI_Bcast(&n, 1, MPI_INT64_T, 0, comm));
  values.resize(static_cast<size_t>(n));
  constexpr int64_t kPiece = int64_t{1} << 30;
  for (int64_t at = 0; at < n; at += kPiece)
    MT_CHECK_MPI(MPI_Bcast(values.data() + at, static_cast<int>(std::min(kPiece, n - at)), MPI_INT32_T, 0, comm));
}

}  // namespace

void broadcast_examples(std::vector<Example>& examples, MPI_Comm comm) {
  int rank = 0, size = 1;
  MT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  MT_CHECK_MPI(MPI_Comm_size(comm, &size));
  if (size <= 1) return;
  // Per example: its token count and piece count; then every token, label and piece length.
  std::vector<int32_t> shape, tokens, labels, pieces;
  if (rank == 0) {
    for (const Example& e : examples) {
      shape.push_back(static_cast<int32_t>(e.input_ids.size()));
      shape.push_back(static_cast<int32_t>(e.pieces.size()));
      tokens.insert(tokens.end(), e.input_ids.begin(), e.input_ids.end());
      labels.insert(labels.end(), e.labels.begin(), e.labels.end());
      pieces.insert(pieces.end(), e.pieces.begin(), e.pieces.end());
    }
  }
  for (auto* v : {&shape, &tokens, &labels, &pieces}) broadcast_ints(*v, comm);
  if (rank == 0) return;
  examples.assign(shape.size() / 2, {});
  size_t t = 0, p = 0;
  for (size_t k = 0; k < examples.size(); ++k) {
    const auto n = static_cast<size_t>(shape[2 * k]), np = static_cast<size_t>(shape[2 * k + 1]);
    Example& e = examples[k];
    e.input_ids.assign(tokens.begin() + static_cast<std::ptrdiff_t>(t), tokens.begin() + static_cast<std::ptrdiff_t>(t + n));
    e.labels.assign(labels.begin() + static_cast<std::ptrdiff_t>(t), labels.begin() + static_cast<std::ptrdiff_t>(t + n));
    e.pieces.assign(pieces.begin() + static_cast<std::ptrdiff_t>(p), pieces.begin() + static_cast<std::ptrdiff_t>(p + np));
    t += n;
    p += np;
  }
}

}  // namespace mt
