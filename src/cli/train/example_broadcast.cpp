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
  // Per example: its token, piece, rejected and KL token counts and its KTO tag; then every token, label and piece
  // length, every rejected token and label, every KL token and label.
  constexpr size_t kShape = 5;
  std::vector<int32_t> shape, tokens, labels, pieces, rejected, rejected_labels, kl, kl_labels;
  const auto append = [](std::vector<int32_t>& to, const std::vector<int32_t>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  if (rank == 0) {
    for (const Example& e : examples) {
      shape.insert(shape.end(), {static_cast<int32_t>(e.input_ids.size()), static_cast<int32_t>(e.pieces.size()),
                                 static_cast<int32_t>(e.rejected_ids.size()), static_cast<int32_t>(e.kl_ids.size()),
                                 e.desirable ? 1 : 0});
      append(tokens, e.input_ids);
      append(labels, e.labels);
      append(pieces, e.pieces);
      append(rejected, e.rejected_ids);
      append(rejected_labels, e.rejected_labels);
      append(kl, e.kl_ids);
      append(kl_labels, e.kl_labels);
    }
  }
  for (auto* v : {&shape, &tokens, &labels, &pieces, &rejected, &rejected_labels, &kl, &kl_labels})
    broadcast_ints(*v, comm);
  if (rank == 0) return;
  examples.assign(shape.size() / kShape, {});
  size_t t = 0, p = 0, r = 0, k = 0;
  // The next n values of `from` from position `at` (moved on).
  const auto take = [](const std::vector<int32_t>& from, size_t& at, size_t n) {
    std::vector<int32_t> part(from.begin() + static_cast<std::ptrdiff_t>(at),
                              from.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
    return part;
  };
  for (size_t i = 0; i < examples.size(); ++i) {
    const int32_t* s = &shape[kShape * i];
    Example& e = examples[i];
    size_t t_labels = t, r_labels = r, k_labels = k;
    e.input_ids = take(tokens, t, static_cast<size_t>(s[0]));
    e.labels = take(labels, t_labels, static_cast<size_t>(s[0]));
    e.pieces = take(pieces, p, static_cast<size_t>(s[1]));
    e.rejected_ids = take(rejected, r, static_cast<size_t>(s[2]));
    e.rejected_labels = take(rejected_labels, r_labels, static_cast<size_t>(s[2]));
    e.kl_ids = take(kl, k, static_cast<size_t>(s[3]));
    e.kl_labels = take(kl_labels, k_labels, static_cast<size_t>(s[3]));
    e.desirable = s[4] != 0;
  }
}

}  // namespace mt
