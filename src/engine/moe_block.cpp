// Mixture-of-experts block forward and backward (see moe_block.h).
#include "engine/moe_block.h"

#include <algorithm>

#include "core/error.h"
#include "engine/moe_aux.h"

namespace mt {
namespace {

// The widest MoE layer's dimensions.
struct MoeDims {
  int64_t E = 0, k = 0, I = 0, S = 0;
};
MoeDims widest(const ModelSpec& spec) {
  MoeDims d;
  for (const LayerSpec& l : spec.layers) {
    if (!l.moe.active()) continue;
    d.E = std::max(d.E, l.moe.num_experts);
    d.k = std::max(d.k, l.moe.top_k);
    d.I = std::max(d.I, l.moe.intermediate_size);
    d.S = std::max(d.S, l.moe.shared_intermediate_size);
  }
  return d;
}

// f(pointer, elements per token, element bytes or 0 for the compute dtype) for every per-token buffer.
template <typename F>
void each_buffer(MoeScratch& s, const MoeDims& d, int64_t H, F f) {
  const int64_t R = d.k;  // routed rows per token
  f(reinterpret_cast<void*&>(s.logits), d.E, 0);
  f(reinterpret_cast<void*&>(s.d_logits), d.E, 0);
  f(reinterpret_cast<void*&>(s.probs), d.E, sizeof(real));
  f(reinterpret_cast<void*&>(s.weights), d.k, sizeof(real));
  f(reinterpret_cast<void*&>(s.d_weights), d.k, sizeof(real));
  f(reinterpret_cast<void*&>(s.idx), d.k, 4);
  f(reinterpret_cast<void*&>(s.source), d.k, 4);
  f(reinterpret_cast<void*&>(s.row_of), d.k, 4);
  for (void** p : {&s.xs, &s.ys}) f(*p, R * H, 0);
  for (void** p : {&s.gate_up, &s.d_gate_up}) f(*p, R * 2 * d.I, 0);
  for (void** p : {&s.act, &s.d_act}) f(*p, R * d.I, 0);
  for (void** p : {&s.s_gate_up, &s.d_s_gate_up}) f(*p, 2 * d.S, 0);
  for (void** p : {&s.s_act, &s.d_s_act}) f(*p, d.S, 0);
  for (void** p : {&s.s_out, &s.d_s_out}) f(*p, d.S > 0 ? H : 0, 0);
  for (void** p : {&s.s_logit, &s.d_s_logit}) f(*p, d.S > 0 ? 1 : 0, 0);
}

// f(pointer, elements per token, element bytes or 0 for the compute dtype) for every per-token buffer of layer l's
// MoeKept.
template <typename F>
void each_kept(MoeKept& k, const LayerSpec& l, int64_t H, F f) {
  const MoeSpec& m = l.moe;
  f(reinterpret_cast<void*&>(k.probs), m.num_experts, sizeof(real));
  f(reinterpret_cast<void*&>(k.weights), m.top_k, sizeof(real));
  f(reinterpret_cast<void*&>(k.idx), m.top_k, 4);
  f(reinterpret_cast<void*&>(k.source), m.top_k, 4);
  f(reinterpret_cast<void*&>(k.row_of), m.top_k, 4);
  f(k.gate_up, m.top_k * 2 * m.intermediate_size, 0);
  f(k.s_gate_up, 2 * m.shared_intermediate_size, 0);
  const bool gated = m.shared_intermediate_size > 0 && m.shared_gate;
  f(k.s_out, gated ? H : 0, 0);
  f(k.s_logit, gated ? 1 : 0, 0);
}

// The scratch with a keeping layer's kept rows in place of the buffers they replace.
MoeScratch with_kept(const MoeScratch& scratch, const MoeKept& k) {
  MoeScratch v = scratch;
  v.probs = k.probs;
  v.weights = k.weights;
  v.idx = k.idx;
  v.source = k.source;
  v.row_of = k.row_of;
  v.offsets = k.offsets;
  v.gate_up = k.gate_up;
  if (k.s_gate_up) v.s_gate_up = k.s_gate_up;
  if (k.s_out) {
    v.s_out = k.s_out;
    v.s_logit = k.s_logit;
  }
  if (k.filled) v.host_offsets = *k.host_offsets;
  return v;
}

struct Block {
  const LayerContext& ctx;
  int64_t layer;
  const void* w;
  const MicroBatch& mb;
  MoeScratch& s;

  Backend& be() const { return *ctx.backend; }
  const MoeSpec& m() const { return ctx.layer(layer).moe; }
  const MoeOffsets& o() const { return ctx.offsets(layer).moe; }
  int64_t T() const { return mb.tokens(); }
  int64_t H() const { return ctx.spec->hidden_size; }
  int64_t R() const { return mb.tokens() * m().top_k; }
  const void* at(int64_t offset) const { return weight_at(ctx, w, offset); }
  // p + n elements of the compute dtype (the up half of a gate_up row).
  void* plus(void* p, int64_t n) const {
    return static_cast<char*>(p) + n * static_cast<int64_t>(dtype_size(be().dtype()));
  }
  MoeRouting routing() const {
    const MoeSpec& spec = m();
    MoeRouting r;
    r.experts = spec.num_experts;
    r.top_k = spec.top_k;
    r.sigmoid = spec.router == RouterKind::sigmoid_group;
    r.norm_topk = spec.norm_topk;
    r.scaling = static_cast<float>(spec.routed_scaling);
    r.groups = spec.groups;
    r.topk_groups = spec.topk_groups;
    r.score_bias = at(o().score_bias);
    r.topk_softmax = spec.router == RouterKind::topk_softmax;
    return r;
  }
  // The experts' activation act [R, I] from gate_up [R, 2I]: SwiGLU, or GPT-OSS's clamped SwiGLU.
  void expert_act() const {
    const MoeSpec& spec = m();
    const int64_t I = spec.intermediate_size;
    if (spec.clamped_swiglu())
      be().clamped_swiglu_forward(s.act, s.gate_up, plus(s.gate_up, I), R(), I, 2 * I,
                                  static_cast<float>(spec.swiglu_alpha), static_cast<float>(spec.swiglu_limit));
    else
      be().glu_forward(s.act, s.gate_up, plus(s.gate_up, I), R(), I, 2 * I, Activation::silu);
  }
  // d_gate_up [R, 2I] from d_act.
  void expert_act_backward() const {
    const MoeSpec& spec = m();
    const int64_t I = spec.intermediate_size;
    if (spec.clamped_swiglu())
      be().clamped_swiglu_backward(s.d_gate_up, plus(s.d_gate_up, I), s.d_act, s.gate_up, plus(s.gate_up, I), R(), I,
                                   2 * I, static_cast<float>(spec.swiglu_alpha), static_cast<float>(spec.swiglu_limit));
    else
      be().glu_backward(s.d_gate_up, plus(s.d_gate_up, I), nullptr, s.d_act, s.gate_up, plus(s.gate_up, I), R(), I,
                        2 * I, Activation::silu);
  }
  // Expert e's up weight follows its gate weight (and the same for their biases, and for the shared expert's), so
  // that [W_gate; W_up] is one [2I, H] matrix per expert.
  void check_gate_up_adjacent() const {
    const MoeSpec& spec = m();
    const MoeOffsets& off = o();
    const int64_t I = spec.intermediate_size, S = spec.shared_intermediate_size;
    MT_ASSERT(off.up == off.gate + I * H(), "layer {}: the experts' up weight at {}, not after the gate's at {}", layer,
              off.up, off.gate);
    MT_ASSERT(!spec.expert_bias || off.up_bias == off.gate_bias + I,
              "layer {}: the experts' up bias at {}, not after the gate's at {}", layer, off.up_bias, off.gate_bias);
    MT_ASSERT(S == 0 || off.shared.up == off.shared.gate + S * H(),
              "layer {}: the shared expert's up weight at {}, not after its gate's at {}", layer, off.shared.up,
              off.shared.gate);
  }

  // Router and permutation: probs, idx, weights, offsets (backend and host), source, row_of; with `collect` the
  // layer's router statistics.
  void route(const void* in, bool collect) {
    const MoeSpec& spec = m();
    const int64_t E = spec.num_experts, k = spec.top_k;
    be().linear_forward(s.logits, in, at(o().router), at(o().router_bias), T(), H(), E);
    be().moe_route_forward(s.probs, s.idx, s.weights, s.logits, T(), routing());
    MoeAuxState* aux = ctx.moe_aux;
    if (collect && aux != nullptr && aux->slot[static_cast<size_t>(layer)] >= 0) {
      const int64_t row = aux->slot[static_cast<size_t>(layer)] * aux->experts;
      be().moe_router_stats(aux->counts + row, aux->prob_sums + row, s.probs, s.idx, mb.seq_lens, mb.seq_len, T(), E,
                            k);
    }
    be().moe_permute(s.offsets, s.source, s.row_of, s.idx, T(), E, k);
    std::vector<int32_t> offsets(static_cast<size_t>(E) + 1);
    be().download(offsets.data(), s.offsets, static_cast<int64_t>(offsets.size() * sizeof(int32_t)));
    s.host_offsets.assign(offsets.begin(), offsets.end());
  }
  // The experts' gathered inputs xs (Llama 4: scaled by the routing weights).
  void gather_inputs(const void* in) {
    be().moe_gather(s.xs, in, s.source, R(), m().top_k, H());
    if (m().weight_scales_input) be().moe_scale_rows_forward(s.xs, s.weights, s.source, R(), H());
  }
  // gate_up = xs·[W_gate; W_up]ᵀ per expert, one grouped GEMM of width 2I, with the [gate_bias | up_bias] row.
  void projections() {
    const MoeSpec& spec = m();
    const int64_t E = spec.num_experts, I = spec.intermediate_size;
    check_gate_up_adjacent();
    be().grouped_linear_forward(s.gate_up, s.xs, at(o().gate_of(0)), o().expert_stride, s.host_offsets.data(), E, H(),
                                2 * I);
    if (spec.expert_bias)
      be().grouped_bias_forward(s.gate_up, at(o().gate_bias), o().bias_stride, s.offsets, E, R(), 2 * I);
  }
  // The expert outputs ys from the activations.
  void expert_outputs() {
    const MoeSpec& spec = m();
    const int64_t E = spec.num_experts, I = spec.intermediate_size;
    be().grouped_linear_forward(s.ys, s.act, at(o().down_of(0)), o().down_stride, s.host_offsets.data(), E, I, H());
    if (spec.expert_bias) be().grouped_bias_forward(s.ys, at(o().down_bias), H(), s.offsets, E, R(), H());
  }
  // The shared expert: with `projections` its gate_up (one linear of width 2S), always its activation, with `output`
  // its output and (gated) logit.
  void shared(const void* in, bool projections, bool output) {
    const MoeSpec& spec = m();
    if (spec.shared_intermediate_size == 0) return;
    const int64_t S = spec.shared_intermediate_size;
    const MlpOffsets& sh = o().shared;
    if (projections) be().linear_forward(s.s_gate_up, in, at(sh.gate), nullptr, T(), H(), 2 * S);
    be().glu_forward(s.s_act, s.s_gate_up, plus(s.s_gate_up, S), T(), S, 2 * S, Activation::silu);
    if (!output) return;
    be().linear_forward(s.s_out, s.s_act, at(sh.down), nullptr, T(), S, H());
    if (spec.shared_gate) be().linear_forward(s.s_logit, in, at(o().shared_gate), nullptr, T(), H(), 1);
  }

  // Everything from the block input: router, permutation, gathered rows, expert activations, (with outputs) the
  // expert outputs ys, and the shared expert's (its output and logit where `outputs` or its gate needs them).
  void internals(const void* in, bool collect, bool outputs) {
    route(in, collect);
    gather_inputs(in);
    projections();
    expert_act();
    if (outputs) expert_outputs();
    shared(in, true, outputs || m().shared_gate);
  }
  // What a keeping layer's backward recomputes (s holds the kept rows): xs, the activations.
  void kept_internals(const void* in) {
    check_gate_up_adjacent();
    gather_inputs(in);
    expert_act();
    shared(in, false, false);
  }
  // A forward over filled kept rows: the outputs alone (a gated shared expert's output and logit are kept).
  void kept_outputs(const void* in) {
    expert_act();
    expert_outputs();
    shared(in, false, !m().shared_gate);
  }
};

}  // namespace

int64_t moe_scratch_bytes(const ModelSpec& spec, int64_t tokens, int64_t element_size) {
  const MoeDims d = widest(spec);
  if (d.E == 0) return 0;
  MoeScratch s;
  int64_t bytes = (d.E + 1) * 4;
  each_buffer(s, d, spec.hidden_size, [&](void*&, int64_t width, int64_t size) {
    bytes += tokens * width * (size ? size : element_size);
  });
  return bytes;
}

int64_t moe_layer_count(const ModelSpec& spec) {
  return std::count_if(spec.layers.begin(), spec.layers.end(), [](const LayerSpec& l) { return l.moe.active(); });
}

bool moe_layer_keeps(const ModelSpec& spec, int64_t layer, int64_t keep_layers) {
  if (!spec.layers[static_cast<size_t>(layer)].moe.active()) return false;
  const auto later = std::count_if(spec.layers.begin() + layer + 1, spec.layers.end(),
                                   [](const LayerSpec& l) { return l.moe.active(); });
  return later < keep_layers;
}

int64_t moe_kept_bytes(const ModelSpec& spec, int64_t layer, int64_t tokens, int64_t micro_batches, int64_t es) {
  const LayerSpec& l = spec.layers[static_cast<size_t>(layer)];
  if (!l.moe.active()) return 0;
  MoeKept k;
  int64_t bytes = micro_batches * (l.moe.num_experts + 1) * 4;
  each_kept(k, l, spec.hidden_size, [&](void*&, int64_t width, int64_t size) { bytes += tokens * width * (size ? size : es); });
  return bytes;
}

MoeKept allocate_moe_kept(Backend& be, const ModelSpec& spec, int64_t layer, int64_t tokens, int64_t micro_batches,
                          std::vector<void*>& owned) {
  const LayerSpec& l = spec.layers[static_cast<size_t>(layer)];
  MoeKept k;
  const auto es = static_cast<int64_t>(dtype_size(be.dtype()));
  each_kept(k, l, spec.hidden_size, [&](void*& p, int64_t width, int64_t size) {
    if (width == 0) return;
    owned.push_back(be.alloc_bytes(tokens * width * (size ? size : es)));
    p = owned.back();
  });
  owned.push_back(be.alloc_bytes(micro_batches * (l.moe.num_experts + 1) * 4));
  k.offsets = static_cast<int32_t*>(owned.back());
  return k;
}

MoeKept moe_kept_rows(const MoeKept& all, const ModelSpec& spec, int64_t layer, int64_t es, int64_t first_token,
                      int64_t micro_batch, std::vector<int64_t>* host_offsets, bool filled) {
  const LayerSpec& l = spec.layers[static_cast<size_t>(layer)];
  MoeKept k = all;
  each_kept(k, l, spec.hidden_size, [&](void*& p, int64_t width, int64_t size) {
    if (p) p = static_cast<char*>(p) + first_token * width * (size ? size : es);
  });
  k.offsets = all.offsets + micro_batch * (l.moe.num_experts + 1);
  k.host_offsets = host_offsets;
  k.filled = filled;
  return k;
}

MoeScratch allocate_moe_scratch(Backend& be, const ModelSpec& spec, int64_t tokens, std::vector<void*>& owned) {
  MoeScratch s;
  const MoeDims d = widest(spec);
  if (d.E == 0) return s;
  const auto es = static_cast<int64_t>(dtype_size(be.dtype()));
  each_buffer(s, d, spec.hidden_size, [&](void*& p, int64_t width, int64_t size) {
    if (width == 0) return;
    owned.push_back(be.alloc_bytes(tokens * width * (size ? size : es)));
    p = owned.back();
  });
  owned.push_back(be.alloc_bytes((d.E + 1) * 4));
  s.offsets = static_cast<int32_t*>(owned.back());
  return s;
}

void moe_block_forward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, void* out,
                       const MicroBatch& mb, MoeScratch& scratch, const MoeKept* kept) {
  MoeScratch view;
  MoeScratch& s = kept ? (view = with_kept(scratch, *kept)) : scratch;
  Block b{ctx, layer, w, mb, s};
  if (kept && kept->filled) {
    b.kept_outputs(in);
  } else {
    b.internals(in, ctx.moe_aux != nullptr && ctx.moe_aux->collect, true);
    if (ctx.expert_occupancy != nullptr)
      ctx.expert_occupancy->add(s.host_offsets.data(), b.m().num_experts, b.m().top_k);
    if (kept) *kept->host_offsets = s.host_offsets;
  }
  if (b.m().weight_scales_input)  // the weights scaled the inputs: the outputs add unweighted
    b.be().moe_gather_backward(out, s.ys, s.row_of, b.T(), b.m().top_k, b.H(), false);
  else
    b.be().moe_combine_forward(out, s.ys, s.weights, s.row_of, b.T(), b.m().top_k, b.H());
  if (b.m().shared_intermediate_size == 0) return;
  if (b.m().shared_gate)
    b.be().row_sigmoid_gate_forward(out, s.s_out, s.s_logit, b.T(), b.H());
  else
    b.be().add(out, s.s_out, b.T() * b.H());
}

void moe_block_backward(const LayerContext& ctx, int64_t layer, const void* w, const void* in, const void* d_out,
                        void* d_in, real* dw, const MicroBatch& mb, MoeScratch& scratch, const MoeKept* kept) {
  MT_ASSERT(kept == nullptr || kept->filled, "a MoE backward over kept rows its forward did not fill");
  MoeScratch view;
  MoeScratch& s = kept ? (view = with_kept(scratch, *kept)) : scratch;
  Block b{ctx, layer, w, mb, s};
  if (kept)
    b.kept_internals(in);
  else
    b.internals(in, false, false);
  Backend& be = b.be();
  const MoeSpec& m = b.m();
  const MoeOffsets& o = b.o();
  const int64_t T = b.T(), H = b.H(), E = m.num_experts, k = m.top_k, I = m.intermediate_size, R = b.R();
  const int64_t stride = o.expert_stride;
  const int64_t* offsets = s.host_offsets.data();
  // Routed experts: out = Σ_j weights_j · down_e(act(gate_e(x), up_e(x))) (each projection with its bias where the
  // experts have them), or Σ_j expert_e(weights_j · x) (Llama 4). The combine's backward needs no expert outputs:
  // with g the gathered output gradient, dw_down += gᵀ·(weights·act), and u = g·w_down gives d_weights = u·act
  // (+ g·b_down) and d_act = weights·u, so the recompute above skips the down projection.
  void* g = s.ys;  // the backward computes no expert outputs: ys holds g, then the inputs' gradient
  be.moe_gather(g, d_out, s.source, R, k, H);
  if (m.weight_scales_input) {
    be.grouped_linear_backward(s.d_act, grad_at(dw, o.down_of(0)), g, s.act, b.at(o.down_of(0)), o.down_stride,
                               offsets, E, I, H, false);
  } else {
    void* weighted_act = s.d_gate_up;  // free until the activation's backward
    be.copy_bytes(weighted_act, s.act, R * I * static_cast<int64_t>(dtype_size(be.dtype())));
    be.moe_scale_rows_forward(weighted_act, s.weights, s.source, R, I);
    be.grouped_linear_backward(s.d_act, grad_at(dw, o.down_of(0)), g, weighted_act, b.at(o.down_of(0)),
                               o.down_stride, offsets, E, I, H, false);
    be.moe_combine_weights_backward(s.d_act, s.d_weights, s.act, s.weights, s.source, s.idx, d_out,
                                    m.expert_bias ? b.at(o.down_bias) : nullptr, R, k, I, H);
    if (m.expert_bias) be.moe_scale_rows_forward(g, s.weights, s.source, R, H);  // the outputs' gradient
  }
  if (m.expert_bias) be.grouped_bias_backward(grad_at(dw, o.down_bias), g, H, s.offsets, E, R, H);
  b.expert_act_backward();
  if (m.expert_bias)
    be.grouped_bias_backward(grad_at(dw, o.gate_bias), s.d_gate_up, o.bias_stride, s.offsets, E, R, 2 * I);
  void* d_xs = s.ys;  // g is spent
  be.grouped_linear_backward(d_xs, grad_at(dw, o.gate_of(0)), s.d_gate_up, s.xs, b.at(o.gate_of(0)), stride, offsets,
                             E, H, 2 * I, false);
  if (m.weight_scales_input) be.moe_scale_rows_backward(d_xs, s.d_weights, in, s.weights, s.source, R, k, H);
  be.moe_gather_backward(d_in, d_xs, s.row_of, T, k, H, false);
  // Router: the routing weights' gradient, plus the load-balancing loss's through the probabilities.
  const real* aux_grad = ctx.moe_aux != nullptr ? ctx.moe_aux->grad : nullptr;
  be.moe_route_backward(s.d_logits, s.d_weights, s.probs, s.idx, s.weights, aux_grad, mb.seq_lens, mb.seq_len, T,
                        b.routing());
  be.linear_backward(d_in, grad_at(dw, o.router), grad_at(dw, o.router_bias), s.d_logits, in, b.at(o.router), T, H,
                     E, true, 1.0f);
  if (m.shared_intermediate_size == 0) return;
  // Shared expert: out += [sigmoid(x · w_gate) ·] down(silu(gate(x)) · up(x)).
  const int64_t S = m.shared_intermediate_size;
  const MlpOffsets& sh = o.shared;
  const void* d_shared = d_out;
  if (m.shared_gate) {
    be.row_sigmoid_gate_backward(s.d_s_out, s.d_s_logit, d_out, s.s_out, s.s_logit, T, H);
    be.linear_backward(d_in, grad_at(dw, o.shared_gate), nullptr, s.d_s_logit, in, b.at(o.shared_gate), T, H, 1, true, 1.0f);
    d_shared = s.d_s_out;
  }
  be.linear_backward(s.d_s_act, grad_at(dw, sh.down), nullptr, d_shared, s.s_act, b.at(sh.down), T, S, H, false, 1.0f);
  be.glu_backward(s.d_s_gate_up, b.plus(s.d_s_gate_up, S), nullptr, s.d_s_act, s.s_gate_up, b.plus(s.s_gate_up, S), T,
                  S, 2 * S, Activation::silu);
  be.linear_backward(d_in, grad_at(dw, sh.gate), nullptr, s.d_s_gate_up, in, b.at(sh.gate), T, H, 2 * S, true, 1.0f);
}

}  // namespace mt
