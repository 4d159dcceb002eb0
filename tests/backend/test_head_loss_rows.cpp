// CPU backend fused head + cross-entropy with per-row terms (preference training): each row's CE returned, and the
// gradient of Σ row_weight·CE, against the unweighted op row by row and against finite differences of a
// per-sequence objective (a weighted sum of sequences' summed log-probabilities).
#include <cmath>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

using mt::test::numeric_grad;
using mt::test::random_floats;
using mt::test::rel_err;

TEST_CASE("head_loss_rows returns each row's CE and weighs each row's gradient", "[backend][head_loss]") {
  auto be = mt::make_cpu_backend();
  const int64_t T = 300, H = 8, V = 16;  // chunks of 128 rows, the second all ignored
  const float scale = 0.25f;
  auto x = random_floats(T * H, 11), w = random_floats(V * H, 12);
  std::vector<int32_t> targets(T);
  for (int64_t t = 0; t < T; ++t) targets[t] = (t >= 128 && t < 256) || t % 7 == 3 ? -100 : int32_t((t * 5) % V);
  std::vector<float> weight(T);
  for (int64_t t = 0; t < T; ++t) weight[t] = static_cast<float>((t % 5) - 2) * 0.75f;  // negative, zero, positive
  std::vector<float> dx(T * H), dw(V * H, 0.f), row_loss(T, 7.f);
  const double total = be->head_loss_rows(dx.data(), dw.data(), x.data(), w.data(), targets.data(), weight.data(),
                                          row_loss.data(), T, H, V, scale, 0.f);
  // Row by row: the unweighted op on one row gives that row's CE, and its gradient times the weight.
  std::vector<double> want_dx(T * H, 0.0), want_dw(V * H, 0.0);
  double sum = 0.0;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> one_dx(H), one_dw(V * H, 0.f);
    const double ce = be->head_loss(one_dx.data(), one_dw.data(), x.data() + t * H, w.data(), targets.data() + t, 1,
                                    H, V, scale * weight[t], 0.f);
    CHECK(std::abs(row_loss[t] - ce) <= 1e-6 * std::max(1.0, ce));
    if (targets[t] == -100) CHECK(row_loss[t] == 0.f);
    sum += ce;
    for (int64_t h = 0; h < H; ++h) want_dx[t * H + h] = one_dx[h];
    for (int64_t i = 0; i < V * H; ++i) want_dw[i] += one_dw[i];
  }
  CHECK(std::abs(total - sum) <= 1e-9 * sum);
  CHECK(rel_err(dx, want_dx) < 1e-5);
  CHECK(rel_err(dw, want_dw) < 1e-5);
  // The forward only (dx, dw null) gives the same rows.
  std::vector<float> rows_only(T);
  be->head_loss_rows(nullptr, nullptr, x.data(), w.data(), targets.data(), nullptr, rows_only.data(), T, H, V, 0.f,
                     0.f);
  CHECK(rows_only == row_loss);
}

TEST_CASE("head_loss_rows gradients of a per-sequence objective match finite differences", "[backend][head_loss]") {
  auto be = mt::make_cpu_backend();
  const int64_t S = 3, L = 4, T = S * L, H = 8, V = 11;  // 3 sequences of 4 tokens
  auto x = random_floats(T * H, 14), w = random_floats(V * H, 15);
  const std::vector<int32_t> targets = {-100, 3, 5, -100, 2, 2, 9, 10, -100, -100, 0, -100};
  const std::vector<double> seq_weight = {0.7, -1.3, 0.4};  // ∂objective/∂logp of each sequence
  // objective = Σ_s seq_weight[s]·logp_s, logp_s = −Σ CE over its rows; soft-capped logits, as Gemma 2's head.
  const float softcap = 2.5f;
  std::vector<float> scratch(T);
  auto objective = [&] {
    be->head_loss_rows(nullptr, nullptr, x.data(), w.data(), targets.data(), nullptr, scratch.data(), T, H, V, 0.f,
                       softcap);
    double sum = 0.0;
    for (int64_t t = 0; t < T; ++t) sum -= seq_weight[t / L] * scratch[t];
    return sum;
  };
  std::vector<float> row_weight(T);
  for (int64_t t = 0; t < T; ++t) row_weight[t] = static_cast<float>(-seq_weight[t / L]);
  std::vector<float> dx(T * H), dw(V * H, 0.f);
  be->head_loss_rows(dx.data(), dw.data(), x.data(), w.data(), targets.data(), row_weight.data(), nullptr, T, H, V,
                     1.f, softcap);
  CHECK(rel_err(dx, numeric_grad(x, objective, 1e-3f)) < 1e-2);
  CHECK(rel_err(dw, numeric_grad(w, objective, 1e-3f)) < 1e-2);
}
