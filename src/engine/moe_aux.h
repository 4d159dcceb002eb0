// MoeAuxState: the router load-balancing loss's running statistics during one pass, in backend memory, and the
// gradient its backward adds to every router's probabilities. The engine owns it (engine.cpp); MoE blocks read
// it through LayerContext::moe_aux. ExpertOccupancy: host counters of how many experts each MoE forward gave rows
// and the share of a forward's tokens the busiest expert received (what bench reports: at training batch sizes
// nearly every expert receives tokens, so a layer streams whole; the busiest expert says how imbalanced routing was).
// Invariant: counts and prob_sums are accumulated only by the pass's first forward (collect), never by the
// recomputing forwards of backward; grad is set (or null: no aux loss) before the first MoE backward of the pass.
// ExpertOccupancy counts every MoE block forward (not the recomputing ones), padded rows routed as they are.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace mt {

struct ExpertOccupancy {
  int64_t forwards = 0;           // MoE layer forwards over a micro-batch
  int64_t experts = 0;            // Σ over them of the layer's experts
  int64_t experts_with_rows = 0;  // Σ of those that received at least one row
  double lowest = 1.0;            // the smallest fraction of one forward (1 when none ran)
  double busiest_shares = 0.0;    // Σ over them of the most rows one expert received over the forward's tokens
  double fraction() const { return experts ? static_cast<double>(experts_with_rows) / static_cast<double>(experts) : 0.0; }
  // The busiest expert's share of a forward's tokens, on average over the forwards: top_k / experts when perfectly
  // balanced, 1 when every token chose one expert (0 when none ran).
  double busiest() const { return forwards ? busiest_shares / static_cast<double>(forwards) : 0.0; }
  // offsets: the forward's expert row offsets [num_experts + 1] (every token's top_k rows).
  void add(const int64_t* offsets, int64_t num_experts, int64_t top_k) {
    int64_t with_rows = 0, most = 0;
    for (int64_t e = 0; e < num_experts; ++e) {
      with_rows += offsets[e + 1] > offsets[e] ? 1 : 0;
      most = std::max(most, offsets[e + 1] - offsets[e]);
    }
    ++forwards;
    experts += num_experts;
    experts_with_rows += with_rows;
    lowest = std::min(lowest, static_cast<double>(with_rows) / static_cast<double>(num_experts));
    const int64_t tokens = offsets[num_experts] / std::max<int64_t>(top_k, 1);
    if (tokens > 0) busiest_shares += static_cast<double>(most) / static_cast<double>(tokens);
  }
  void merge(const ExpertOccupancy& o) {
    forwards += o.forwards;
    experts += o.experts;
    experts_with_rows += o.experts_with_rows;
    lowest = std::min(lowest, o.lowest);
    busiest_shares += o.busiest_shares;
  }
};

struct MoeAuxState {
  int64_t experts = 0;           // E, the same on every MoE layer
  std::vector<int64_t> slot;     // per layer: its row of counts / prob_sums, -1 for dense layers
  int32_t* counts = nullptr;     // [MoE layers, E] routed valid rows per expert
  real* prob_sums = nullptr;     // [MoE layers, E] Σ over valid tokens of the router probabilities
  const real* grad = nullptr;    // [E] ∂(weighted aux loss)/∂probs[t, e] of each valid token; null = aux loss off
  bool collect = false;
};

}  // namespace mt
