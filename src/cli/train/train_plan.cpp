// TrainPlan over MPI: serialised as JSON by name, broadcast as its length then its bytes (see train_plan.h).
#include "cli/train/train_plan.h"

#include <mpi.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <tuple>

#include "dist/check.h"
#include "dist/context.h"
#include "io/json_fields.h"

namespace mt {

// The plan's wire format: one table per struct, named member by member. The worker ranks read no layer offset
// (HostStore, the optimizer and the checkpoint saver walk regions and their slots only), but the plan carries the
// whole layout, MoE and MLA offsets included, so that what a worker holds equals rank 0's layout and a new member
// missing from a table fails the round-trip test (tests/integration/test_train_plan.cpp) instead of going unsent.
template <>
struct JsonFields<RowGrouping> {
  static constexpr auto table = std::make_tuple(MT_JSON_FIELD(RowGrouping, groups), MT_JSON_FIELD(RowGrouping, parts));
};
template <>
struct JsonFields<ExpertColumns> {
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(ExpertColumns, experts), MT_JSON_FIELD(ExpertColumns, interleaved));
};
template <>
struct JsonFields<ParamSlot> {
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(ParamSlot, hf_name), MT_JSON_FIELD(ParamSlot, shape),
                      MT_JSON_FIELD(ParamSlot, offset), MT_JSON_FIELD(ParamSlot, numel),
                      MT_JSON_FIELD(ParamSlot, weight_decay), MT_JSON_FIELD(ParamSlot, init),
                      MT_JSON_FIELD(ParamSlot, rows), MT_JSON_FIELD(ParamSlot, expert_columns));
};
template <>
struct JsonFields<AttentionOffsets> {
  using O = AttentionOffsets;
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(O, q), MT_JSON_FIELD(O, q_bias), MT_JSON_FIELD(O, k), MT_JSON_FIELD(O, k_bias),
                      MT_JSON_FIELD(O, v), MT_JSON_FIELD(O, v_bias), MT_JSON_FIELD(O, o), MT_JSON_FIELD(O, o_bias),
                      MT_JSON_FIELD(O, q_norm), MT_JSON_FIELD(O, k_norm), MT_JSON_FIELD(O, sinks),
                      MT_JSON_FIELD(O, out_gate), MT_JSON_FIELD(O, out_gate_bias));
};
template <>
struct JsonFields<DeltaNetOffsets> {
  using O = DeltaNetOffsets;
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(O, qkv), MT_JSON_FIELD(O, z), MT_JSON_FIELD(O, ba), MT_JSON_FIELD(O, conv),
                      MT_JSON_FIELD(O, a_log), MT_JSON_FIELD(O, dt_bias), MT_JSON_FIELD(O, norm),
                      MT_JSON_FIELD(O, out));
};
template <>
struct JsonFields<LightningOffsets> {
  using O = LightningOffsets;
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(O, qkv), MT_JSON_FIELD(O, gate), MT_JSON_FIELD(O, norm), MT_JSON_FIELD(O, out));
};
template <>
struct JsonFields<MlaOffsets> {
  using O = MlaOffsets;
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(O, q_a), MT_JSON_FIELD(O, q_a_bias), MT_JSON_FIELD(O, q_a_norm),
                      MT_JSON_FIELD(O, q_nope), MT_JSON_FIELD(O, q_rope), MT_JSON_FIELD(O, kv_latent),
                      MT_JSON_FIELD(O, kv_rope), MT_JSON_FIELD(O, kv_latent_bias), MT_JSON_FIELD(O, kv_rope_bias),
                      MT_JSON_FIELD(O, kv_norm), MT_JSON_FIELD(O, k_nope), MT_JSON_FIELD(O, v), MT_JSON_FIELD(O, o),
                      MT_JSON_FIELD(O, o_bias));
};
template <>
struct JsonFields<MlpOffsets> {
  using O = MlpOffsets;
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(O, gate), MT_JSON_FIELD(O, gate_bias), MT_JSON_FIELD(O, up),
                      MT_JSON_FIELD(O, up_bias), MT_JSON_FIELD(O, down), MT_JSON_FIELD(O, down_bias));
};
template <>
struct JsonFields<MoeOffsets> {
  using O = MoeOffsets;
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(O, router), MT_JSON_FIELD(O, router_bias), MT_JSON_FIELD(O, score_bias),
                      MT_JSON_FIELD(O, experts), MT_JSON_FIELD(O, expert_stride), MT_JSON_FIELD(O, down_stride),
                      MT_JSON_FIELD(O, gate), MT_JSON_FIELD(O, up), MT_JSON_FIELD(O, down), MT_JSON_FIELD(O, gate_bias),
                      MT_JSON_FIELD(O, up_bias), MT_JSON_FIELD(O, down_bias), MT_JSON_FIELD(O, bias_stride),
                      MT_JSON_FIELD(O, shared), MT_JSON_FIELD(O, shared_gate));
};
template <>
struct JsonFields<LayerOffsets> {
  using O = LayerOffsets;
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(O, input_norm), MT_JSON_FIELD(O, attn_out_norm), MT_JSON_FIELD(O, mlp_norm),
                      MT_JSON_FIELD(O, mlp_out_norm), MT_JSON_FIELD(O, attention), MT_JSON_FIELD(O, mlp),
                      MT_JSON_FIELD(O, moe), MT_JSON_FIELD(O, deltanet), MT_JSON_FIELD(O, mla),
                      MT_JSON_FIELD(O, lightning));
};
template <>
struct JsonFields<Region> {
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(Region, kind), MT_JSON_FIELD(Region, layer), MT_JSON_FIELD(Region, params),
                      MT_JSON_FIELD(Region, numel), MT_JSON_FIELD(Region, offsets));
};
template <>
struct JsonFields<HeadOffsets> {
  static constexpr auto table = std::make_tuple(MT_JSON_FIELD(HeadOffsets, norm), MT_JSON_FIELD(HeadOffsets, lm_head));
};
template <>
struct JsonFields<ParamLayout> {
  using L = ParamLayout;
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(L, regions), MT_JSON_FIELD(L, head), MT_JSON_FIELD(L, total_numel),
                      MT_JSON_FIELD(L, largest_region_numel), MT_JSON_FIELD(L, largest_layer_numel));
};
template <>
struct JsonFields<OptimizerSettings> {
  using O = OptimizerSettings;
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(O, beta1), MT_JSON_FIELD(O, beta2), MT_JSON_FIELD(O, eps),
                      MT_JSON_FIELD(O, weight_decay), MT_JSON_FIELD(O, max_grad_norm), MT_JSON_FIELD(O, passes));
};
template <>
struct JsonFields<TierSettings> {
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(TierSettings, mode), MT_JSON_FIELD(TierSettings, paths),
                      MT_JSON_FIELD(TierSettings, tag), MT_JSON_FIELD(TierSettings, io));
};
template <>
struct JsonFields<TrainPlan> {
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(TrainPlan, layout), MT_JSON_FIELD(TrainPlan, dtype),
                      MT_JSON_FIELD(TrainPlan, optimizer), MT_JSON_FIELD(TrainPlan, updates_applied),
                      MT_JSON_FIELD(TrainPlan, tier));
};

TierSettings tier_settings_of(const Config& c) {
  TierSettings t;
  t.mode = offload_mode_from_name(c.store.offload);
  t.paths = c.store.offload_paths;
  t.io = c.runtime.tier_io;
  std::error_code ec;
  const std::string out = std::filesystem::absolute(c.training.output_dir, ec).lexically_normal().string();
  t.tag = fmt::format("{:016x}", std::hash<std::string>{}(out));
  return t;
}

std::string serialise_train_plan(const TrainPlan& plan) { return to_named_json(plan).dump(); }

TrainPlan parse_train_plan(const std::string& text) {
  TrainPlan plan;
  from_named_json(nlohmann::json::parse(text), "train plan", plan);
  return plan;
}

void broadcast_train_plan(const TrainPlan& plan) {
  const std::string text = serialise_train_plan(plan);
  unsigned long long size = text.size();
  MT_CHECK_MPI(MPI_Bcast(&size, 1, MPI_UNSIGNED_LONG_LONG, 0, dist::context().node));
  MT_CHECK_MPI(MPI_Bcast(const_cast<char*>(text.data()), static_cast<int>(size), MPI_CHAR, 0, dist::context().node));
}

TrainPlan receive_train_plan() {
  unsigned long long size = 0;
  MT_CHECK_MPI(MPI_Bcast(&size, 1, MPI_UNSIGNED_LONG_LONG, 0, dist::context().node));
  std::string text(size, '\0');
  MT_CHECK_MPI(MPI_Bcast(text.data(), static_cast<int>(size), MPI_CHAR, 0, dist::context().node));
  return parse_train_plan(text);
}

}  // namespace mt
