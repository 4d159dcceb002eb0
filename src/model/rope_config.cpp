// config.json → RopeSpec for default, linear, llama3, yarn, longrope (Phi-3) and dynamic (NTK-aware) RoPE.
// Invariant: defaults and derived values are transformers 5's (modeling_rope_utils.py); every rejection names the key.
#include "model/rope_config.h"

#include <cmath>

namespace mt {

ConfigKeys rope_dict(const ConfigKeys& top) {
  return top.object(top.has("rope_scaling") ? "rope_scaling" : "rope_parameters");
}

RopeSpec parse_rope(const ConfigKeys& top, const ConfigKeys& r, int64_t max_positions, double default_theta) {
  const std::string& where = r.where;
  RopeSpec rope;
  rope.type = r.string("rope_type", r.string("type", "default"));
  rope.theta = r.number("rope_theta", top.number("rope_theta", default_theta));
  rope.partial_rotary_factor = r.number("partial_rotary_factor", top.number("partial_rotary_factor", 1.0));
  const auto original_max = [&] {
    return top.has("original_max_position_embeddings") ? top.integer("original_max_position_embeddings")
                                                       : r.integer("original_max_position_embeddings", max_positions);
  };
  if (rope.type == "default") {
  } else if (rope.type == "linear") {
    rope.factor = r.number("factor");
  } else if (rope.type == "llama3") {
    rope.factor = r.number("factor");
    rope.low_freq_factor = r.number("low_freq_factor");
    rope.high_freq_factor = r.number("high_freq_factor");
    rope.original_max_position_embeddings = original_max();
    // Equal factors (Llama 4 Scout's 1 and 1) leave no medium band: every frequency is kept or divided by factor.
    MT_REQUIRE(rope.high_freq_factor >= rope.low_freq_factor,
               "model config {}: key '{}high_freq_factor' must not be below low_freq_factor", top.origin, where);
  } else if (rope.type == "yarn") {
    rope.original_max_position_embeddings = original_max();
    MT_REQUIRE(rope.original_max_position_embeddings > 0,
               "model config {}: key '{}original_max_position_embeddings' must be positive", top.origin, where);
    rope.factor = r.number(
        "factor", static_cast<double>(max_positions) / static_cast<double>(rope.original_max_position_embeddings));
    const double beta_fast = r.number("beta_fast", 0.0), beta_slow = r.number("beta_slow", 0.0);
    rope.beta_fast = beta_fast != 0.0 ? beta_fast : 32.0;  // transformers: `get("beta_fast") or 32`
    rope.beta_slow = beta_slow != 0.0 ? beta_slow : 1.0;
    rope.truncate = r.boolean("truncate", true);
    const double mscale = r.number("mscale", 0.0), mscale_all_dim = r.number("mscale_all_dim", 0.0);
    const auto get_mscale = [&](double m) { return rope.factor <= 1.0 ? 1.0 : 0.1 * m * std::log(rope.factor) + 1.0; };
    if (r.has("attention_factor"))
      rope.attention_factor = r.number("attention_factor");
    else if (mscale != 0.0 && mscale_all_dim != 0.0)
      rope.attention_factor = get_mscale(mscale) / get_mscale(mscale_all_dim);
    MT_REQUIRE(rope.attention_factor >= 0.0, "model config {}: key '{}attention_factor' must not be negative",
               top.origin, where);
  } else if (rope.type == "longrope") {
    rope.short_factor = r.numbers("short_factor");
    rope.long_factor = r.numbers("long_factor");
    // Phi-3 keeps the pretrained length in original_max_position_embeddings and scales by the ratio to it.
    const bool has_original = top.has("original_max_position_embeddings") || r.has("original_max_position_embeddings");
    rope.original_max_position_embeddings = has_original ? original_max() : max_positions;
    MT_REQUIRE(rope.original_max_position_embeddings > 0,
               "model config {}: key 'original_max_position_embeddings' must be positive", top.origin);
    rope.factor = r.number("factor", static_cast<double>(max_positions) /
                                         static_cast<double>(rope.original_max_position_embeddings));
    if (r.has("attention_factor")) {
      rope.attention_factor = r.number("attention_factor");
    } else {
      rope.attention_factor =
          rope.factor <= 1.0
              ? 1.0
              : std::sqrt(1.0 + std::log(rope.factor) /
                                    std::log(static_cast<double>(rope.original_max_position_embeddings)));
    }
  } else if (rope.type == "dynamic") {
    rope.factor = r.number("factor");
    rope.original_max_position_embeddings = max_positions;
  } else {
    MT_REQUIRE(false,
               "model config {}: key '{}{}' is '{}', a rope type that is not supported (supported: default, linear, "
               "llama3, yarn, longrope, dynamic)",
               top.origin, where, r.has("rope_type") ? "rope_type" : "type", rope.type);
  }
  MT_REQUIRE(rope.theta > 0.0, "model config {}: key 'rope_theta' must be positive", top.origin);
  MT_REQUIRE(rope.factor > 0.0, "model config {}: key '{}factor' must be positive", top.origin, where);
  MT_REQUIRE(rope.type != "llama3" || rope.original_max_position_embeddings > 0,
             "model config {}: key '{}original_max_position_embeddings' must be positive", top.origin, where);
  MT_REQUIRE(rope.partial_rotary_factor > 0.0 && rope.partial_rotary_factor <= 1.0,
             "model config {}: key 'partial_rotary_factor' must be in (0, 1]", top.origin);
  return rope;
}

}  // namespace mt
