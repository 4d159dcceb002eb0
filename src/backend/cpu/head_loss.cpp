// Fused LM head + cross-entropy over row chunks: logits [chunk, V] = x·wᵀ exist for one chunk at a time; with a
// soft-cap they become softcap·tanh(logits/softcap) (Gemma 2's final_logit_softcapping: divide, tanh, multiply) and
// the gradient goes back through the tanh.
// Invariant: the returned Σ CE (fp64, unscaled) adds per-row losses in token order; rows with target −100 add
// nothing and get zero gradient; dx is overwritten, dw accumulates grad_scale · ∂Σ/∂w (each row's CE weighted by
// row_weight where given); both null: the loss only. row_loss, where given, gets every row's CE (0 where ignored).

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "backend/cpu/row_block_gemm.h"

namespace mt::cpu {
namespace {

constexpr int32_t ignore_index = -100;

// Rows per chunk: at most 128, and the logits scratch at most 8 Mi floats (32 MiB).
int64_t chunk_rows(int64_t V) { return std::clamp<int64_t>((int64_t{1} << 23) / V, 1, 128); }

// Turns one row of logits into its gradient scale·(softmax − onehot) in place; returns the row's CE.
double softmax_ce_row(real* logits, int64_t V, int32_t target, real scale) {
  const real m = *std::max_element(logits, logits + V);
  double sum = 0.0;
  for (int64_t c = 0; c < V; ++c) sum += std::exp(static_cast<double>(logits[c] - m));
  const double lse = static_cast<double>(m) + std::log(sum);
  const double ce = lse - static_cast<double>(logits[target]);
  for (int64_t c = 0; c < V; ++c) logits[c] = scale * static_cast<real>(std::exp(logits[c] - lse));
  logits[target] -= scale;
  return ce;
}

// Soft-caps one row of logits in place; dcap[c] gets ∂capped/∂logit = 1 − tanh².
void softcap_row(real* logits, real* dcap, int64_t V, real softcap) {
  for (int64_t c = 0; c < V; ++c) {
    const real t = std::tanh(logits[c] / softcap);
    logits[c] = softcap * t;
    dcap[c] = 1.f - t * t;
  }
}

}  // namespace

double head_loss(real* dx, real* dw, const real* x, const real* w, const int32_t* targets,
                 const real* row_weight, real* row_loss, int64_t T, int64_t H, int64_t V, real grad_scale,
                 real softcap) {
  MT_ASSERT(T >= 0 && H > 0 && V > 0);
  MT_ASSERT((dx == nullptr) == (dw == nullptr), "head_loss: dx and dw are both set or both null");
  MT_ASSERT(std::isfinite(softcap) && softcap >= 0.f, "head softcap {}", softcap);
  for (int64_t t = 0; t < T; ++t) {
    MT_ASSERT(targets[t] == ignore_index || (targets[t] >= 0 && targets[t] < V), "target {} at token {} (V = {})",
              targets[t], t, V);
  }
  const int64_t chunk = chunk_rows(V);
  std::vector<real> logits(static_cast<size_t>(std::min(chunk, T) * V));
  std::vector<real> dcap(softcap > 0.f ? logits.size() : 0);  // the tanh's derivative, where soft-capped
  std::vector<double> chunk_loss(static_cast<size_t>(chunk));
  double total = 0.0;
  for (int64_t t0 = 0; t0 < T; t0 += chunk) {
    const int64_t rows = std::min(chunk, T - t0);
    const int32_t* tg = targets + t0;
    if (std::all_of(tg, tg + rows, [](int32_t t) { return t == ignore_index; })) {
      if (dx) std::fill_n(dx + t0 * H, rows * H, 0.f);
      if (row_loss) std::fill_n(row_loss + t0, rows, 0.f);
      continue;
    }
    gemm_row_blocks(false, true, rows, V, H, 1.f, x + t0 * H, H, w, H, 0.f, logits.data(), V);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      real* row = logits.data() + r * V;
      const real scale = row_weight ? grad_scale * row_weight[t0 + r] : grad_scale;
      if (tg[r] == ignore_index) {
        std::fill_n(row, V, 0.f);
        chunk_loss[static_cast<size_t>(r)] = 0.0;
      } else if (softcap > 0.f) {
        real* dc = dcap.data() + r * V;
        softcap_row(row, dc, V, softcap);
        chunk_loss[static_cast<size_t>(r)] = softmax_ce_row(row, V, tg[r], scale);
        for (int64_t c = 0; c < V; ++c) row[c] *= dc[c];
      } else {
        chunk_loss[static_cast<size_t>(r)] = softmax_ce_row(row, V, tg[r], scale);
      }
    }
    for (int64_t r = 0; r < rows; ++r) total += chunk_loss[static_cast<size_t>(r)];
    if (row_loss)
      for (int64_t r = 0; r < rows; ++r) row_loss[t0 + r] = static_cast<real>(chunk_loss[static_cast<size_t>(r)]);
    if (!dx) continue;  // the loss only
    gemm_row_blocks(false, false, rows, H, V, 1.f, logits.data(), V, w, H, 0.f, dx + t0 * H, H);
    gemm_row_blocks(true, false, V, H, rows, 1.f, logits.data(), V, x + t0 * H, H, 1.f, dw, H);
  }
  return total;
}

}  // namespace mt::cpu
