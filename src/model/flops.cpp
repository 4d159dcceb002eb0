// Step FLOPs (see flops.h).
#include "model/flops.h"

#include <algorithm>
#include <vector>

namespace mt {

double mixer_flops_per_token(const LayerSpec& l, int64_t seq_len) {
  if (l.is_deltanet()) {
    const DeltaNetSpec& d = l.deltanet;
    return 18.0 * static_cast<double>(d.num_v_heads * d.k_head_dim * d.v_head_dim) +
           6.0 * static_cast<double>(d.conv_dim() * d.conv_kernel);
  }
  if (l.is_lightning()) {  // per head a rank-1 state update and a state read forward, three such sweeps backward
    const LightningSpec& t = l.lightning;
    return 16.0 * static_cast<double>(t.num_heads * t.head_dim * t.head_dim);
  }
  int64_t keys = l.attention.window > 0 ? std::min(l.attention.window, seq_len) : seq_len;
  if (l.attention.chunk > 0) keys = std::min(keys, l.attention.chunk);  // chunked attention: the chunk's keys
  // q·k and p·v over the keys, forward and backward: 6·heads·(q/k head dim + value head dim) per key.
  const int64_t v_dim = l.is_mla() ? l.mla.v_head_dim : l.attention.head_dim;
  return 6.0 * static_cast<double>(l.attention.num_heads * (l.attention.head_dim + v_dim) * keys);
}

std::vector<double> region_flops_per_token(const ModelSpec& spec, const ParamLayout& layout, int64_t seq_len) {
  std::vector<double> flops(layout.regions.size(), 0.0);
  for (size_t r = 1; r < layout.regions.size(); ++r) {
    double matmul = 0;
    for (const ParamSlot& slot : layout.regions[r].params) {
      // Matrices, and the 3-D stacks of expert matrices; not the depthwise conv1d weights, nor the stacked expert
      // biases (GPT-OSS's [E, O]).
      const bool conv = slot.offset == layout.regions[r].offsets.deltanet.conv;
      const bool stacked_bias = slot.expert_columns.experts > 0 && slot.shape.size() == 2;
      if ((slot.shape.size() == 2 && !stacked_bias) || (slot.shape.size() == 3 && !conv))
        matmul += static_cast<double>(slot.numel);
    }
    flops[r] = 6.0 * matmul;
  }
  if (layout.head.lm_head < 0) flops.back() += 6.0 * static_cast<double>(spec.vocab_size * spec.hidden_size);  // tied
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    double& f = flops[i + 1];
    // A token computes with its top_k experts only: the others' matrices leave the count.
    if (l.moe.active())
      f -= 6.0 * static_cast<double>((l.moe.num_experts - l.moe.top_k) * 3 * l.moe.intermediate_size * spec.hidden_size);
    f += mixer_flops_per_token(l, seq_len);
  }
  return flops;
}

StepFlops step_flops(const ModelSpec& spec, const ParamLayout& layout, int64_t tokens, int64_t seq_len) {
  double per_token = 0;
  for (const double f : region_flops_per_token(spec, layout, seq_len)) per_token += f;
  const auto inactive = static_cast<double>(inactive_expert_parameters(spec));
  const auto t = static_cast<double>(tokens);
  return {6.0 * (static_cast<double>(layout.total_numel) - inactive) * t, per_token * t};
}

double model_flops_per_token(const ModelSpec& spec, int64_t seq_len) {
  return step_flops(spec, make_param_layout(spec), 1, seq_len).model;
}

}  // namespace mt
