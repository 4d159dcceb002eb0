// The MoE routers' backward against central finite differences, shared by the router tests of every family.
// Invariant: the selection is held fixed (the loss REQUIREs the forward to pick the same experts at every step), and
// the functional is Σ r·weights plus, where aux is given, Σ aux_e·probs over the valid tokens (lens, seq; none: all).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"

namespace mt::test {

// rel_err of moe_route_backward's d_logits against the finite differences of that functional at logits.
inline double router_gradient_error(Backend& be, std::vector<float> logits, const MoeRouting& router, int64_t T,
                                    const std::vector<float>& r, const std::vector<float>* aux = nullptr,
                                    const std::vector<int32_t>* lens = nullptr, int64_t seq = 0) {
  const int64_t E = router.experts, k = router.top_k;
  std::vector<float> probs(T * E), weights(T * k);
  std::vector<int32_t> idx(T * k);
  be.moe_route_forward(probs.data(), idx.data(), weights.data(), logits.data(), T, router);
  const std::vector<int32_t> chosen = idx;
  auto loss = [&] {
    std::vector<float> p(T * E), w(T * k);
    std::vector<int32_t> ix(T * k);
    be.moe_route_forward(p.data(), ix.data(), w.data(), logits.data(), T, router);
    REQUIRE(ix == chosen);
    double v = project(r, w);
    if (aux != nullptr)
      for (int64_t t = 0; t < T; ++t)
        if (lens == nullptr || t % seq < (*lens)[static_cast<size_t>(t / seq)])
          for (int64_t e = 0; e < E; ++e) v += static_cast<double>((*aux)[static_cast<size_t>(e)]) * p[t * E + e];
    return v;
  };
  std::vector<float> dl(T * E, 7.f);  // overwritten, never accumulated into
  be.moe_route_backward(dl.data(), r.data(), probs.data(), idx.data(), weights.data(),
                        aux != nullptr ? aux->data() : nullptr, lens != nullptr ? lens->data() : nullptr,
                        lens != nullptr ? seq : T, T, router);
  return rel_err(dl, numeric_grad(logits, loss, 1e-3f));
}

}  // namespace mt::test
