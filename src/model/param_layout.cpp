// ModelSpec → ParamLayout: the HF tensors of each host region, in the fixed order param_layout.h states.
// Invariant: slots are packed back to back from offset 0, and decoder regions differ only in their names.
#include "model/param_layout.h"

#include <algorithm>

#include "core/error.h"

namespace mt {
namespace {

// Appends a slot at the region's end and returns its offset.
int64_t add(Region& r, std::string name, std::vector<int64_t> shape, InitKind init) {
  ParamSlot p;
  p.hf_name = std::move(name);
  p.shape = std::move(shape);
  p.offset = r.numel;
  p.numel = 1;
  for (const int64_t d : p.shape) p.numel *= d;
  p.weight_decay = p.shape.size() >= 2;
  p.init = init;
  r.numel += p.numel;
  r.params.push_back(std::move(p));
  return r.params.back().offset;
}

int64_t add_matrix(Region& r, const std::string& name, int64_t rows, int64_t cols) {
  return add(r, name, {rows, cols}, InitKind::normal);
}
int64_t add_vector(Region& r, const std::string& name, int64_t n, InitKind init) { return add(r, name, {n}, init); }

Region decoder_region(const ModelSpec& s, int64_t layer, DecoderOffsets& o) {
  Region r;
  r.kind = RegionKind::decoder_layer;
  r.layer = layer;
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  const int64_t h = s.hidden_size, q_dim = s.num_heads * s.head_dim, kv_dim = s.num_kv_heads * s.head_dim;
  const int64_t inter = s.intermediate_size;
  // A projection [out, in] and, when `bias`, its bias [out].
  const auto linear = [&](const std::string& name, int64_t out, int64_t in, bool bias, int64_t& w, int64_t& b) {
    w = add_matrix(r, p + name + ".weight", out, in);
    if (bias) b = add_vector(r, p + name + ".bias", out, InitKind::zeros);
  };
  o.input_norm = add_vector(r, p + "input_layernorm.weight", h, InitKind::ones);
  linear("self_attn.q_proj", q_dim, h, s.attention_bias, o.q, o.q_bias);
  linear("self_attn.k_proj", kv_dim, h, s.attention_bias, o.k, o.k_bias);
  linear("self_attn.v_proj", kv_dim, h, s.attention_bias, o.v, o.v_bias);
  linear("self_attn.o_proj", h, q_dim, s.o_proj_bias, o.o, o.o_bias);
  if (s.qk_norm) {
    o.q_norm = add_vector(r, p + "self_attn.q_norm.weight", s.head_dim, InitKind::ones);
    o.k_norm = add_vector(r, p + "self_attn.k_norm.weight", s.head_dim, InitKind::ones);
  }
  o.post_norm = add_vector(r, p + "post_attention_layernorm.weight", h, InitKind::ones);
  linear("mlp.gate_proj", inter, h, s.mlp_bias, o.gate, o.gate_bias);
  linear("mlp.up_proj", inter, h, s.mlp_bias, o.up, o.up_bias);
  linear("mlp.down_proj", h, inter, s.mlp_bias, o.down, o.down_bias);
  return r;
}

}  // namespace

ParamLayout make_param_layout(const ModelSpec& spec) {
  MT_ASSERT(spec.num_layers > 0 && spec.hidden_size > 0 && spec.head_dim > 0, "ModelSpec not validated");
  ParamLayout layout;
  layout.regions.reserve(static_cast<size_t>(spec.num_layers) + 2);

  Region embedding;
  embedding.kind = RegionKind::embedding;
  add_matrix(embedding, "model.embed_tokens.weight", spec.vocab_size, spec.hidden_size);
  layout.regions.push_back(std::move(embedding));

  for (int64_t i = 0; i < spec.num_layers; ++i) layout.regions.push_back(decoder_region(spec, i, layout.decoder));

  Region head;
  head.kind = RegionKind::head;
  layout.head.norm = add_vector(head, "model.norm.weight", spec.hidden_size, InitKind::ones);
  if (!spec.tie_word_embeddings)
    layout.head.lm_head = add_matrix(head, "lm_head.weight", spec.vocab_size, spec.hidden_size);
  layout.regions.push_back(std::move(head));

  for (const Region& r : layout.regions) {
    layout.total_numel += r.numel;
    layout.largest_region_numel = std::max(layout.largest_region_numel, r.numel);
  }
  return layout;
}

}  // namespace mt
