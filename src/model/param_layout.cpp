// ModelSpec → ParamLayout: the HF tensors of each host region from its layer's spec and the family's tensor names.
// Invariant: slots are packed back to back from offset 0 in a fixed order (input norm, attention, its output
// norm, MLP norm (none with a parallel residual), MLP or mixture of experts, its output norm; a LayerNorm's bias
// directly after its weight; a Gated DeltaNet or latent-attention mixer in place of attention),
// so layers with equal specs have equal offsets; an MoE layer's experts are laid out one after another with equal
// strides (fused expert tensors: all gate|up matrices, then all down matrices).
#include "model/param_layout.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace mt {
namespace {

// Appends a slot at the region's end and returns its offset.
int64_t add(Region& r, std::string name, std::vector<int64_t> shape, InitKind init, RowGrouping rows = {}) {
  ParamSlot p;
  p.hf_name = std::move(name);
  p.shape = std::move(shape);
  p.offset = r.numel;
  p.numel = 1;
  for (const int64_t d : p.shape) p.numel *= d;
  p.weight_decay = p.shape.size() >= 2;
  p.init = init;
  p.rows = std::move(rows);
  r.numel += p.numel;
  r.params.push_back(std::move(p));
  return r.params.back().offset;
}

// A hidden-size norm "<name>.weight" [H] (and "<name>.bias" [H] directly after it where the kind has one); RMSNorm
// weights start at rms_init, LayerNorm weights at one and biases at zero.
int64_t add_hidden_norm(Region& r, const std::string& name, int64_t H, NormKind kind, InitKind rms_init) {
  const int64_t w = add(r, name + ".weight", {H}, kind == NormKind::rms ? rms_init : InitKind::ones);
  if (kind == NormKind::layer_with_bias) add(r, name + ".bias", {H}, InitKind::zeros);
  return w;
}

struct LayerBuilder {
  Region& r;
  std::string prefix;  // "model.layers.3."
  int64_t H;

  InitKind norm_init;  // ones for w·x̂ norms, zeros for (1 + w)·x̂ ones (transformers' init of both)

  NormKind hidden_kind;  // ModelSpec::norm_kind

  int64_t norm(const std::string& name, int64_t n) { return add(r, prefix + name + ".weight", {n}, norm_init); }
  // A hidden-size norm of the model's kind: its weight and, for a LayerNorm with bias, "<name>.bias" right after it.
  int64_t hidden_norm(const std::string& name) { return add_hidden_norm(r, prefix + name, H, hidden_kind, norm_init); }
  // A tensor named without the ".weight" suffix (A_log, dt_bias).
  int64_t raw(const std::string& name, std::vector<int64_t> shape, InitKind init) {
    return add(r, prefix + name, std::move(shape), init);
  }
  // A projection [out, in] and, when `bias`, its bias [out].
  void linear(const std::string& name, int64_t out, int64_t in, bool bias, int64_t& w, int64_t& b) {
    w = add(r, prefix + name + ".weight", {out, in}, InitKind::normal);
    if (bias) b = add(r, prefix + name + ".bias", {out}, InitKind::zeros);
  }
  // One HF tensor of row blocks `outs` (each [outs[p], in]); offsets of the parts in the store's order.
  void fused(const std::string& name, const std::vector<int64_t>& outs, int64_t in, bool bias,
             const std::vector<int64_t*>& w, const std::vector<int64_t*>& b, const RowGrouping& rows) {
    int64_t total = 0;
    for (const int64_t o : outs) total += o;
    const int64_t base = add(r, prefix + name + ".weight", {total, in}, InitKind::normal, rows);
    for (size_t p = 0, row = 0; p < outs.size(); row += static_cast<size_t>(outs[p]), ++p)
      *w[p] = base + static_cast<int64_t>(row) * in;
    if (!bias) return;
    const int64_t bias_base = add(r, prefix + name + ".bias", {total}, InitKind::zeros, rows);
    for (size_t p = 0, row = 0; p < outs.size(); row += static_cast<size_t>(outs[p]), ++p)
      *b[p] = bias_base + static_cast<int64_t>(row);
  }
};

void attention_params(LayerBuilder& l, const AttentionSpec& a, const TensorNames& n, AttentionOffsets& o) {
  const int64_t qd = a.q_dim(), kvd = a.kv_dim(), H = l.H;
  if (a.output_gate) {
    // q_proj rows per head: head_dim query rows then head_dim gate rows; stored as all queries | all gates.
    MT_ASSERT(n.qkv.empty(), "an output gate with a fused qkv tensor");
    const RowGrouping rows{a.num_heads, {a.head_dim, a.head_dim}};
    l.fused(n.q, {qd, qd}, H, a.qkv_bias, {&o.q, &o.out_gate}, {&o.q_bias, &o.out_gate_bias}, rows);
    l.linear(n.k, kvd, H, a.qkv_bias, o.k, o.k_bias);
    l.linear(n.v, kvd, H, a.qkv_bias, o.v, o.v_bias);
  } else if (n.qkv.empty()) {
    l.linear(n.q, qd, H, a.qkv_bias, o.q, o.q_bias);
    l.linear(n.k, kvd, H, a.qkv_bias, o.k, o.k_bias);
    l.linear(n.v, kvd, H, a.qkv_bias, o.v, o.v_bias);
  } else {
    RowGrouping rows;
    if (n.qkv_grouped && a.num_kv_heads > 1) {
      const int64_t group = a.num_heads / a.num_kv_heads;
      rows = {a.num_kv_heads, {group * a.head_dim, a.head_dim, a.head_dim}};
    }
    l.fused(n.qkv, {qd, kvd, kvd}, H, a.qkv_bias, {&o.q, &o.k, &o.v}, {&o.q_bias, &o.k_bias, &o.v_bias}, rows);
  }
  l.linear(n.o, H, qd, a.o_bias, o.o, o.o_bias);
  if (a.qk_norm) {
    o.q_norm = l.norm(n.q_norm, a.q_norm_width());
    o.k_norm = l.norm(n.k_norm, a.k_norm_width());
  }
  if (a.qk_layer_norm) {  // a LayerNorm weight per head (Cohere), starting at one
    o.q_norm = add(l.r, l.prefix + n.q_norm + ".weight", {a.num_heads, a.head_dim}, InitKind::ones);
    o.k_norm = add(l.r, l.prefix + n.k_norm + ".weight", {a.num_kv_heads, a.head_dim}, InitKind::ones);
  }
  if (a.sinks) o.sinks = l.raw(n.sinks, {a.num_heads}, InitKind::normal);
}

void deltanet_params(LayerBuilder& l, const DeltaNetSpec& d, const TensorNames& n, DeltaNetOffsets& o) {
  const int64_t H = l.H, nv = d.num_v_heads, group = d.num_v_heads / d.num_k_heads;
  int64_t unused = -1;
  if (n.dn_qkvz.empty()) {
    l.linear(n.dn_qkv, d.conv_dim(), H, false, o.qkv, unused);
    l.linear(n.dn_z, d.value_dim(), H, false, o.z, unused);
    l.linear(n.dn_b, nv, H, false, o.ba, unused);
    int64_t a = -1;
    l.linear(n.dn_a, nv, H, false, a, unused);  // directly after b: ba addresses both
  } else {
    // Qwen3-Next: rows grouped by k head (its q, k, v heads, z heads; its b heads, a heads), stored q|k|v|z and b|a.
    const int64_t dk = d.k_head_dim, gv = group * d.v_head_dim;
    int64_t k = -1, v = -1;
    l.fused(n.dn_qkvz, {d.key_dim(), d.key_dim(), d.value_dim(), d.value_dim()}, H, false, {&o.qkv, &k, &v, &o.z}, {},
            {d.num_k_heads, {dk, dk, gv, gv}});
    int64_t a = -1;
    l.fused(n.dn_ba, {nv, nv}, H, false, {&o.ba, &a}, {}, {d.num_k_heads, {group, group}});
  }
  o.conv = l.raw(n.dn_conv + ".weight", {d.conv_dim(), 1, d.conv_kernel}, InitKind::normal);
  o.dt_bias = l.raw(n.dn_dt_bias, {nv}, InitKind::ones);
  o.a_log = l.raw(n.dn_a_log, {nv}, InitKind::a_log);
  o.norm = add(l.r, l.prefix + n.dn_norm + ".weight", {d.v_head_dim}, InitKind::ones);  // a plain w·x̂ norm
  l.linear(n.dn_out, H, d.value_dim(), false, o.out, unused);
}

void lightning_params(LayerBuilder& l, const LightningSpec& t, const TensorNames& n, LightningOffsets& o) {
  int64_t unused = -1;
  l.linear(n.lt_qkv, 3 * t.width(), l.H, false, o.qkv, unused);
  l.linear(n.lt_gate, t.width(), l.H, false, o.gate, unused);
  o.norm = add(l.r, l.prefix + n.lt_norm + ".weight", {t.width()}, InitKind::ones);  // a plain w·x̂ norm
  l.linear(n.lt_out, l.H, t.width(), false, o.out, unused);
}

// The query's and kv_b_proj's rows come per head ([nope | rope], [k_nope | v]); the store groups each part over
// the heads, so every part is one contiguous matrix.
void mla_params(LayerBuilder& l, const MlaSpec& m, const TensorNames& n, MlaOffsets& o) {
  const int64_t H = l.H, heads = m.num_heads, nope = m.qk_nope_head_dim, rope = m.qk_rope_head_dim;
  const RowGrouping q_rows{heads, {nope, rope}};
  if (m.q_lora_rank > 0) {
    l.linear(n.mla_q_a, m.q_lora_rank, H, m.bias, o.q_a, o.q_a_bias);
    o.q_a_norm = l.norm(n.mla_q_a_norm, m.q_lora_rank);
    l.fused(n.mla_q_b, {heads * nope, heads * rope}, m.q_lora_rank, false, {&o.q_nope, &o.q_rope}, {}, q_rows);
  } else {
    l.fused(n.q, {heads * nope, heads * rope}, H, false, {&o.q_nope, &o.q_rope}, {}, q_rows);
  }
  l.fused(n.mla_kv_a, {m.kv_lora_rank, rope}, H, m.bias, {&o.kv_latent, &o.kv_rope},
          {&o.kv_latent_bias, &o.kv_rope_bias}, {});
  o.kv_norm = l.norm(n.mla_kv_a_norm, m.kv_lora_rank);
  l.fused(n.mla_kv_b, {heads * nope, m.v_dim()}, m.kv_lora_rank, false, {&o.k_nope, &o.v}, {},
          {heads, {nope, m.v_head_dim}});
  l.linear(n.o, H, m.v_dim(), m.bias, o.o, o.o_bias);
}

void mlp_params(LayerBuilder& l, const MlpSpec& m, const TensorNames& n, MlpOffsets& o) {
  const int64_t I = m.intermediate_size, H = l.H;
  if (!m.gated) {
    l.linear(n.up, I, H, m.bias, o.up, o.up_bias);
  } else if (n.gate_up.empty()) {
    l.linear(n.gate, I, H, m.bias, o.gate, o.gate_bias);
    l.linear(n.up, I, H, m.bias, o.up, o.up_bias);
  } else {
    l.fused(n.gate_up, {I, I}, H, m.bias, {&o.gate, &o.up}, {&o.gate_bias, &o.up_bias}, {});
  }
  l.linear(n.down, H, I, m.bias, o.down, o.down_bias);
}

// The experts fused into 3-D tensors (names.fused_experts), stored per expert in nn.Linear form: its I gate rows, its
// I up rows [.., H], its down [H, I]. FusedExpertLayout::rows: gate_up_proj [E, 2I, H], down_proj [E, H, I] as
// stored (Qwen3.5-MoE); columns: [E, H, 2I] (gate | up columns) and [E, I, H], each expert's matrix transposed
// (Llama 4); interleaved_columns: the same with gate and up columns alternating, and biases [E, 2I] and [E, H]
// (GPT-OSS, MoeSpec::expert_bias).
void fused_expert_params(LayerBuilder& l, const MoeSpec& m, const TensorNames& n, MoeOffsets& o) {
  const int64_t I = m.intermediate_size, H = l.H, E = m.num_experts;
  const bool rows = n.fused_layout == FusedExpertLayout::rows;
  const bool interleaved = n.fused_layout == FusedExpertLayout::interleaved_columns;
  const ExpertColumns columns = rows ? ExpertColumns{} : ExpertColumns{E, false};
  o.experts = l.raw(n.experts + n.fused_gate_up, rows ? std::vector<int64_t>{E, 2 * I, H} : std::vector<int64_t>{E, H, 2 * I},
                    InitKind::normal);
  l.r.params.back().expert_columns = rows ? ExpertColumns{} : ExpertColumns{E, interleaved};
  o.gate = 0;
  o.up = I * H;
  o.expert_stride = 2 * I * H;
  if (m.expert_bias) {
    o.gate_bias = l.raw(n.experts + n.fused_gate_up + "_bias", {E, 2 * I}, InitKind::zeros);
    l.r.params.back().expert_columns = {E, interleaved};
    l.r.params.back().weight_decay = false;  // biases never decay, stacked or not
    o.up_bias = o.gate_bias + I;
    o.bias_stride = 2 * I;
  }
  o.down = l.raw(n.experts + n.fused_down, rows ? std::vector<int64_t>{E, H, I} : std::vector<int64_t>{E, I, H},
                 InitKind::normal) - o.experts;
  l.r.params.back().expert_columns = columns;
  o.down_stride = H * I;
  if (m.expert_bias) {
    o.down_bias = l.raw(n.experts + n.fused_down + "_bias", {E, H}, InitKind::zeros);
    l.r.params.back().weight_decay = false;
  }
}

// Router, experts in order (each gate, up, down under its own HF names) or the fused expert tensors, then the
// shared expert and its gate.
void moe_params(LayerBuilder& l, const MoeSpec& m, const TensorNames& n, MoeOffsets& o) {
  const int64_t I = m.intermediate_size, H = l.H, E = m.num_experts;
  int64_t unused = -1;
  l.linear(n.router, E, H, m.router_bias, o.router, o.router_bias);
  if (m.router_bias) l.r.params.back().init = InitKind::normal;  // GptOssTopKRouter's bias: normal, as its weight
  if (m.router == RouterKind::sigmoid_group && !n.router_score_bias.empty())
    o.score_bias = add(l.r, l.prefix + n.router_score_bias, {E}, InitKind::zeros);
  if (n.fused_experts) fused_expert_params(l, m, n, o);
  for (int64_t e = 0; e < E && !n.fused_experts; ++e) {
    const std::string expert = n.experts + std::to_string(e) + ".";
    int64_t gate = -1, up = -1, down = -1;
    l.linear(expert + n.expert_gate, I, H, false, gate, unused);
    l.linear(expert + n.expert_up, I, H, false, up, unused);
    l.linear(expert + n.expert_down, H, I, false, down, unused);
    if (e == 0) {
      o.experts = gate;
      o.up = up - gate;
      o.down = down - gate;
      o.expert_stride = o.down_stride = down + H * I - gate;
    }
  }
  if (m.shared_intermediate_size > 0) {
    const int64_t S = m.shared_intermediate_size;
    l.linear(n.shared_gate_proj, S, H, false, o.shared.gate, unused);
    l.linear(n.shared_up_proj, S, H, false, o.shared.up, unused);
    l.linear(n.shared_down_proj, H, S, false, o.shared.down, unused);
    if (m.shared_gate) l.linear(n.shared_expert_gate, 1, H, false, o.shared_gate, unused);
  }
}

Region decoder_region(const ModelSpec& s, int64_t layer) {
  Region r;
  r.kind = RegionKind::decoder_layer;
  r.layer = layer;
  const LayerSpec& spec = s.layers[static_cast<size_t>(layer)];
  const TensorNames& n = s.names;
  LayerBuilder l{r, n.layer_prefix + std::to_string(layer) + ".", s.hidden_size,
                 s.norm_style == NormStyle::one_plus_weight ? InitKind::zeros : InitKind::ones, s.norm_kind};
  LayerOffsets& o = r.offsets;
  if (spec.pre_norms) o.input_norm = l.hidden_norm(n.input_norm);
  if (spec.is_deltanet())
    deltanet_params(l, spec.deltanet, n, o.deltanet);
  else if (spec.is_lightning())
    lightning_params(l, spec.lightning, n, o.lightning);
  else if (spec.is_mla())
    mla_params(l, spec.mla, n, o.mla);
  else
    attention_params(l, spec.attention, n, o.attention);
  if (spec.post_norms) o.attn_out_norm = l.hidden_norm(n.attn_out_norm);
  if (spec.pre_norms && !spec.parallel_residual) o.mlp_norm = l.hidden_norm(n.mlp_norm);
  if (spec.moe.active())
    moe_params(l, spec.moe, n, o.moe);
  else
    mlp_params(l, spec.mlp, n, o.mlp);
  if (spec.post_norms) o.mlp_out_norm = l.hidden_norm(n.mlp_out_norm);
  return r;
}

// Calls f(hf_row_start, store_row_start, rows) for every run of rows a grouping moves.
template <typename F>
void for_row_runs(const ParamSlot& slot, F f) {
  const int64_t cols = slot.shape.size() >= 2 ? slot.numel / slot.shape[0] : 1;
  const RowGrouping& g = slot.rows;
  int64_t group_rows = 0;
  for (const int64_t p : g.parts) group_rows += p;
  int64_t store_row = 0;
  for (size_t p = 0, part_start = 0; p < g.parts.size(); part_start += g.parts[p], ++p)
    for (int64_t k = 0; k < g.groups; ++k, store_row += g.parts[p])
      f((k * group_rows + static_cast<int64_t>(part_start)) * cols, store_row * cols, g.parts[p] * cols);
}

// Calls f(hf_index, store_index) for every element of a stacked-experts slot (ExpertColumns).
template <typename F>
void for_expert_columns(const ParamSlot& slot, F f) {
  const int64_t E = slot.expert_columns.experts, out = slot.shape.back(), in = slot.numel / (E * out);
  const bool interleaved = slot.expert_columns.interleaved;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t i = 0; i < in; ++i)
      for (int64_t c = 0; c < out; ++c) {
        const int64_t row = interleaved ? (c % 2 == 0 ? c / 2 : out / 2 + c / 2) : c;
        f((e * in + i) * out + c, (e * out + row) * in + i);
      }
}

}  // namespace

ParamLayout make_param_layout(const ModelSpec& spec) {
  MT_ASSERT(spec.num_layers > 0 && spec.hidden_size > 0 && static_cast<int64_t>(spec.layers.size()) == spec.num_layers,
            "ModelSpec not validated");
  ParamLayout layout;
  layout.regions.reserve(static_cast<size_t>(spec.num_layers) + 2);

  Region embedding;
  embedding.kind = RegionKind::embedding;
  add(embedding, spec.names.embedding, {spec.vocab_size, spec.hidden_size}, InitKind::normal);
  layout.regions.push_back(std::move(embedding));

  for (int64_t i = 0; i < spec.num_layers; ++i) layout.regions.push_back(decoder_region(spec, i));

  Region head;
  head.kind = RegionKind::head;
  const std::string& final_norm = spec.names.final_norm;
  MT_ASSERT(final_norm.ends_with(".weight"), "final norm tensor {}", final_norm);
  const std::string final_norm_name = final_norm.substr(0, final_norm.size() - std::string(".weight").size());
  layout.head.norm = add_hidden_norm(head, final_norm_name, spec.hidden_size, spec.norm_kind,
                                     spec.norm_style == NormStyle::one_plus_weight ? InitKind::zeros : InitKind::ones);
  if (!spec.tie_word_embeddings)
    layout.head.lm_head = add(head, spec.names.lm_head, {spec.vocab_size, spec.hidden_size}, InitKind::normal);
  layout.regions.push_back(std::move(head));

  for (const Region& r : layout.regions) {
    layout.total_numel += r.numel;
    layout.largest_region_numel = std::max(layout.largest_region_numel, r.numel);
    if (r.kind == RegionKind::decoder_layer) layout.largest_layer_numel = std::max(layout.largest_layer_numel, r.numel);
  }
  return layout;
}

std::vector<DecayRun> decay_runs(const Region& region) {
  std::vector<DecayRun> runs;
  for (const ParamSlot& slot : region.params) {
    if (slot.numel == 0) continue;
    if (!runs.empty() && runs.back().end == slot.offset && runs.back().weight_decay == slot.weight_decay)
      runs.back().end = slot.offset + slot.numel;
    else
      runs.push_back({slot.offset, slot.offset + slot.numel, slot.weight_decay});
  }
  return runs;
}

void hf_rows_to_store(const ParamSlot& slot, const float* hf, float* store) {
  if (slot.expert_columns.experts > 0) {
    for_expert_columns(slot, [&](int64_t h, int64_t s) { store[s] = hf[h]; });
    return;
  }
  if (slot.rows.parts.empty()) {
    std::memcpy(store, hf, static_cast<size_t>(slot.numel) * sizeof(float));
    return;
  }
  for_row_runs(slot, [&](int64_t h, int64_t s, int64_t n) { std::memcpy(store + s, hf + h, static_cast<size_t>(n) * 4); });
}

void store_rows_to_hf(const ParamSlot& slot, const float* store, float* hf) {
  if (slot.expert_columns.experts > 0) {
    for_expert_columns(slot, [&](int64_t h, int64_t s) { hf[h] = store[s]; });
    return;
  }
  if (slot.rows.parts.empty()) {
    std::memcpy(hf, store, static_cast<size_t>(slot.numel) * sizeof(float));
    return;
  }
  for_row_runs(slot, [&](int64_t h, int64_t s, int64_t n) { std::memcpy(hf + h, store + s, static_cast<size_t>(n) * 4); });
}

}  // namespace mt
