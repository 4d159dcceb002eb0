// GptOssForCausalLM (gpt-oss-20b, gpt-oss-120b): attention with biases on q/k/v/o (attention_bias, default true) and
// a learned sink logit per head, sliding_attention (sliding_window, default 128) and full_attention layers
// (layer_types; default: even layers slide), YaRN RoPE (GptOssConfig's default: factor 32, beta_fast 32, beta_slow 1,
// original_max_position_embeddings 4096, truncate false; rope_theta 150000); on every layer a mixture of
// num_local_experts experts with biases, routed by a linear router with bias (top num_experts_per_tok of the logits,
// softmax over those), each expert the clamped SwiGLU (swiglu_alpha, swiglu_limit) over its interleaved gate_up_proj.
// Checkpoints hold the experts stacked ([E, H, 2I], [E, I, H]) in bf16, or as published in MXFP4 (quantization_config
// quant_method mxfp4; dequantised on load, model/mxfp4.h).
#include "model/families.h"
#include "model/rope_config.h"

namespace mt {

void parse_gpt_oss(const ConfigKeys& top, ModelSpec& s) {
  nlohmann::json config = top.j;
  if (!top.has("rope_scaling") && !top.has("rope_parameters"))
    config["rope_parameters"] = {{"rope_type", "yarn"},  {"factor", 32.0},    {"beta_fast", 32.0},
                                 {"beta_slow", 1.0},     {"truncate", false}, {"original_max_position_embeddings", 4096}};
  if (!top.has("rope_theta") && !rope_dict(ConfigKeys{config, top.origin, top.where}).has("rope_theta"))
    config["rope_theta"] = 150000.0;  // GptOssConfig.default_theta
  const ConfigKeys fixed{config, top.origin, top.where};
  parse_dense_model(fixed, {.max_positions = 131072, .kv_heads = 8, .head_dim = 64, .eps = 1e-5}, s);
  if (top.has("quantization_config")) {
    const ConfigKeys q = top.object("quantization_config");
    MT_REQUIRE(q.string("quant_method", "") == "mxfp4",
               "model config {}: key 'quantization_config.quant_method' must be mxfp4 (dequantised on load), got '{}'",
               top.origin, q.string("quant_method", ""));
  }
  std::vector<bool> fallback(static_cast<size_t>(s.num_layers));
  for (size_t i = 0; i < fallback.size(); ++i) fallback[i] = (i + 1) % 2 != 0;
  const std::vector<bool> sliding = sliding_layers(top, s.num_layers, fallback);
  const bool null_window = top.j.contains("sliding_window") && top.at("sliding_window").is_null();
  const int64_t window = null_window ? 0 : sliding_window_size(top, 128);
  const bool bias = top.boolean("attention_bias", true);
  MoeSpec moe = parse_moe_spec(top, "num_local_experts", 128, "intermediate_size", 4);
  moe.router = RouterKind::topk_softmax;
  moe.router_bias = moe.expert_bias = true;
  moe.swiglu_alpha = top.number("swiglu_alpha", 1.702);
  moe.swiglu_limit = top.number("swiglu_limit", 7.0);
  MT_REQUIRE(moe.swiglu_limit > 0.0, "model config {}: key 'swiglu_limit' must be positive", top.origin);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    LayerSpec& l = s.layers[i];
    l.attention.window = sliding[i] ? window : 0;
    l.attention.qkv_bias = l.attention.o_bias = bias;
    l.attention.sinks = true;
    l.moe = moe;
  }
  parse_router_aux_loss(top, s);
  TensorNames& n = s.names;
  n.router = "mlp.router";
  n.experts = "mlp.experts.";
  n.fused_experts = true;
  n.fused_layout = FusedExpertLayout::interleaved_columns;
}

}  // namespace mt
