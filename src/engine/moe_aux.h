// MoeAuxState: the router load-balancing loss's running statistics during one pass, in backend memory, and the
// gradient its backward adds to every router's probabilities. The engine owns it (engine.cpp); MoE blocks read
// it through LayerContext::moe_aux.
// Invariant: counts and prob_sums are accumulated only by the pass's first forward (collect), never by the
// recomputing forwards of backward; grad is set (or null: no aux loss) before the first MoE backward of the pass.
#pragma once
#include <cstdint>
#include <vector>

namespace mt {

struct MoeAuxState {
  int64_t experts = 0;           // E, the same on every MoE layer
  std::vector<int64_t> slot;     // per layer: its row of counts / prob_sums, -1 for dense layers
  int32_t* counts = nullptr;     // [MoE layers, E] routed valid rows per expert
  float* prob_sums = nullptr;    // [MoE layers, E] Σ over valid tokens of the router probabilities
  const float* grad = nullptr;   // [E] ∂(weighted aux loss)/∂probs[t, e] of each valid token; null = aux loss off
  bool collect = false;
};

}  // namespace mt
