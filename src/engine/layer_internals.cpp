// Widths, allocation and row views of layer internals and scratch (see layer_internals.h).
#include "engine/layer_internals.h"

#include <algorithm>

namespace mt {
namespace {

// f(buffer, width) for each buffer of the internals, in member order.
template <typename I, typename W, typename F>
void each_buffer(I& n, const W& w, F f) {
  f(n.q_raw, w.q_raw);
  f(n.k_raw, w.k_raw);
  f(n.q, w.q);
  f(n.k, w.k);
  f(n.v, w.v);
  f(n.attn, w.attn);
  f(n.attn_out, w.attn_out);
  f(n.h1, w.h1);
  f(n.gate, w.gate);
  f(n.up, w.up);
  f(n.mlp_out, w.mlp_out);
  f(n.out_gate, w.out_gate);
  f(n.gated_attn, w.gated_attn);
  f(n.dn_qkv_raw, w.dn_qkv_raw);
  f(n.dn_qkv, w.dn_qkv);
  f(n.dn_z, w.dn_z);
  f(n.dn_ba, w.dn_ba);
  f(n.dn_core, w.dn_core);
  f(n.dn_normed, w.dn_normed);
  f(n.mla_q_latent, w.mla_q_latent);
  f(n.mla_kv_latent, w.mla_kv_latent);
  f(n.lt_qkv, w.lt_qkv);
  f(n.lt_normed, w.lt_normed);
}


template <typename S, typename W, typename F>
void each_scratch(S& s, const W& w, F f) {
  f(s.norm1, w.norm1);
  f(s.norm2, w.norm2);
  f(s.d_hidden, w.d_hidden);
  f(s.d_norm, w.d_norm);
  f(s.d_block, w.d_block);
  f(s.d_attn, w.d_attn);
  f(s.dq, w.dq);
  f(s.dk, w.dk);
  f(s.dv, w.dv);
  f(s.d_out_gate, w.d_out_gate);
  f(s.dn_d_normed, w.dn_d_normed);
  f(s.dn_d_core, w.dn_d_core);
  f(s.dn_d_z, w.dn_d_z);
  f(s.dn_d_qkv, w.dn_d_qkv);
  f(s.dn_d_qkv_raw, w.dn_d_qkv_raw);
  f(s.dn_d_ba, w.dn_d_ba);
  f(s.mla_q_nope, w.mla_q_nope);
  f(s.mla_q_rope, w.mla_q_rope);
  f(s.mla_k_nope, w.mla_k_nope);
  f(s.mla_k_rope, w.mla_k_rope);
  f(s.mla_d_q_latent, w.mla_d_q_latent);
  f(s.mla_d_q_raw, w.mla_d_q_raw);
  f(s.mla_d_kv_latent, w.mla_d_kv_latent);
  f(s.mla_d_kv_raw, w.mla_d_kv_raw);
  f(s.lt_d_core, w.lt_d_core);
  f(s.lt_d_qkv, w.lt_d_qkv);
}

}  // namespace

InternalsWidths internals_widths(const LayerSpec& l, int64_t H, bool with_raw) {
  InternalsWidths w;
  w.attn_out = l.post_norms ? H : 0;
  w.h1 = H;
  w.gate = w.up = l.moe.active() ? 0 : l.mlp.intermediate_size;  // MoE layers: moe_block.h's scratch
  if (!l.mlp.gated) w.gate = 0;
  w.mlp_out = l.post_norms ? H : 0;
  if (l.is_deltanet()) {
    const DeltaNetSpec& d = l.deltanet;
    w.dn_qkv_raw = w.dn_qkv = d.conv_dim();
    w.dn_z = w.dn_core = w.dn_normed = d.value_dim();
    w.dn_ba = 2 * d.num_v_heads;
    w.dn_heads = d.num_v_heads;
    return w;
  }
  if (l.is_lightning()) {
    const int64_t W = l.lightning.width();
    w.lt_qkv = 3 * W;
    w.attn = w.out_gate = w.gated_attn = w.lt_normed = W;
    return w;
  }
  if (l.is_mla()) {
    const MlaSpec& m = l.mla;
    w.q_raw = w.mla_q_latent = m.q_lora_rank;
    w.k_raw = w.mla_kv_latent = m.kv_lora_rank;
    w.q = w.k = m.q_dim();
    w.v = w.attn = m.v_dim();
    w.lse_heads = m.num_heads;
    return w;
  }
  const AttentionSpec& a = l.attention;
  if (with_raw) {
    w.q_raw = a.q_dim();
    w.k_raw = a.kv_dim();
  }
  w.q = a.q_dim();
  w.k = w.v = a.kv_dim();
  w.attn = a.q_dim();
  w.out_gate = w.gated_attn = a.output_gate ? a.q_dim() : 0;
  w.lse_heads = a.num_heads;
  return w;
}

InternalsWidths saved_layer_widths(const ModelSpec& spec, int64_t layer) {
  const LayerSpec& l = spec.layers[static_cast<size_t>(layer)];
  return internals_widths(l, spec.hidden_size, l.attention.normed_qk() && l.mixer == MixerKind::attention);
}

InternalsWidths max_internals_widths(const ModelSpec& spec) {
  InternalsWidths m;
  for (const LayerSpec& l : spec.layers) {
    const InternalsWidths w = internals_widths(l, spec.hidden_size, true);
    each_buffer(m, w, [](int64_t& a, int64_t b) { a = std::max(a, b); });
    m.lse_heads = std::max(m.lse_heads, w.lse_heads);
    m.dn_heads = std::max(m.dn_heads, w.dn_heads);
  }
  m.gate = m.up = 0;
  return m;
}

LayerInternals allocate_internals(Backend& be, const InternalsWidths& w, int64_t seqs, int64_t seq_len,
                                  std::vector<void*>& owned) {
  const int64_t T = seqs * seq_len;
  LayerInternals n;
  each_buffer(n, w, [&](void*& p, int64_t width) {
    if (width == 0) return;
    owned.push_back(be.alloc(T * width));
    p = owned.back();
  });
  n.lse = be.alloc_reals(T * w.lse_heads);
  owned.push_back(n.lse);
  if (w.dn_heads > 0)
    for (real** p : {&n.dn_g, &n.dn_beta}) {
      *p = be.alloc_reals(T * w.dn_heads);
      owned.push_back(*p);
    }
  return n;
}

LayerInternals internals_rows(const LayerInternals& all, const InternalsWidths& w, int64_t es, int64_t first_seq,
                              int64_t seq_len) {
  const int64_t t0 = first_seq * seq_len;
  LayerInternals r = all;
  each_buffer(r, w, [&](void*& p, int64_t width) {
    if (p) p = static_cast<char*>(p) + t0 * width * es;
  });
  r.lse = all.lse + t0 * w.lse_heads;
  if (all.dn_g) r.dn_g = all.dn_g + t0 * w.dn_heads;
  if (all.dn_beta) r.dn_beta = all.dn_beta + t0 * w.dn_heads;
  return r;
}

ScratchWidths scratch_widths(const ModelSpec& spec) {
  ScratchWidths m;
  const int64_t H = spec.hidden_size;
  for (const LayerSpec& l : spec.layers) {
    const int64_t qd = l.attention.q_dim(), kvd = l.attention.kv_dim();
    // d_block: a post-norm's input gradient
    ScratchWidths w{H, H, H, H, l.post_norms ? H : 0, qd, qd, kvd, kvd};
    w.d_out_gate = l.attention.output_gate ? qd : 0;
    if (l.is_mla()) {
      const MlaSpec& m = l.mla;
      w.d_attn = w.dv = m.v_dim();
      w.dq = w.dk = m.q_dim();
      w.mla_q_nope = w.mla_k_nope = m.num_heads * m.qk_nope_head_dim;
      w.mla_q_rope = m.num_heads * m.qk_rope_head_dim;
      w.mla_k_rope = m.qk_rope_head_dim;
      w.mla_d_q_latent = w.mla_d_q_raw = m.q_lora_rank;
      w.mla_d_kv_latent = w.mla_d_kv_raw = m.kv_lora_rank;
    }
    if (l.is_lightning()) {
      const int64_t W = l.lightning.width();
      w.dq = w.dk = w.dv = 0;
      w.d_attn = w.d_out_gate = w.lt_d_core = W;
      w.lt_d_qkv = 3 * W;
    }
    if (l.is_deltanet()) {
      const DeltaNetSpec& d = l.deltanet;
      w.dn_d_normed = w.dn_d_core = w.dn_d_z = d.value_dim();
      w.dn_d_qkv = w.dn_d_qkv_raw = d.conv_dim();
      w.dn_d_ba = 2 * d.num_v_heads;
      w.dn_heads = d.num_v_heads;
    }
    each_scratch(m, w, [](int64_t& a, int64_t b) { a = std::max(a, b); });
    m.dn_heads = std::max(m.dn_heads, w.dn_heads);
  }
  return m;
}

LayerScratch allocate_scratch(Backend& be, const ScratchWidths& w, int64_t tokens, std::vector<void*>& owned) {
  LayerScratch s;
  each_scratch(s, w, [&](void*& p, int64_t width) {
    if (width == 0) return;
    owned.push_back(be.alloc(tokens * width));
    p = owned.back();
  });
  if (w.dn_heads > 0)
    for (real** p : {&s.dn_dg, &s.dn_dbeta}) {
      *p = be.alloc_reals(tokens * w.dn_heads);
      owned.push_back(*p);
    }
  return s;
}

}  // namespace mt

namespace mt {

int64_t token_chunk_for(int64_t mb_tokens, int64_t requested) {
  return std::min(mb_tokens, requested > 0 ? requested : kDefaultTokenChunk);
}

int64_t mlp_chunk_width(const ModelSpec& spec) {
  int64_t width = 0;
  for (const LayerSpec& l : spec.layers)  // MoE layers: moe_block.h's scratch
    if (!l.moe.active()) width = std::max(width, l.mlp.intermediate_size);
  return width;
}

MlpChunk allocate_mlp_chunk(Backend& be, int64_t width, int64_t tokens, std::vector<void*>& owned) {
  MlpChunk c;
  for (void** p : {&c.gate, &c.up, &c.act, &c.d_act, &c.d_gate, &c.d_up}) {
    *p = be.alloc(tokens * width);
    owned.push_back(*p);
  }
  return c;
}

}  // namespace mt
