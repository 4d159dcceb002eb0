// TrainPlan over MPI: serialised as JSON, broadcast as its length then its bytes (see train_plan.h).
#include "cli/train/train_plan.h"

#include <mpi.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>

#include "dist/check.h"
#include "dist/context.h"

namespace mt {
namespace {

using nlohmann::json;

// Every offset of a decoder region, in one fixed order (to_json and from_json both use it).
template <typename O, typename F>
void each_offset(O& o, F f) {
  for (auto* v : {&o.input_norm, &o.attn_out_norm, &o.mlp_norm, &o.mlp_out_norm, &o.attention.q, &o.attention.q_bias,
                  &o.attention.k, &o.attention.k_bias, &o.attention.v, &o.attention.v_bias, &o.attention.o,
                  &o.attention.o_bias, &o.attention.q_norm, &o.attention.k_norm, &o.mlp.gate, &o.mlp.gate_bias,
                  &o.mlp.up, &o.mlp.up_bias, &o.mlp.down, &o.mlp.down_bias, &o.attention.out_gate,
                  &o.attention.out_gate_bias, &o.deltanet.qkv, &o.deltanet.z, &o.deltanet.ba, &o.deltanet.conv,
                  &o.deltanet.a_log, &o.deltanet.dt_bias, &o.deltanet.norm, &o.deltanet.out, &o.attention.sinks})
    f(*v);
}

json to_json(const TrainPlan& p) {
  const ParamLayout& l = p.layout;
  json regions = json::array();
  for (const Region& r : l.regions) {
    json params = json::array();
    for (const ParamSlot& s : r.params)
      params.push_back({s.hf_name, s.shape, s.offset, s.numel, s.weight_decay, static_cast<int>(s.init), s.rows.groups,
                        s.rows.parts, s.expert_columns.experts, s.expert_columns.interleaved});
    std::vector<int64_t> offsets;
    each_offset(r.offsets, [&](int64_t v) { offsets.push_back(v); });
    regions.push_back({static_cast<int>(r.kind), r.layer, r.numel, params, offsets});
  }
  return {{"regions", regions},
          {"head", {l.head.norm, l.head.lm_head}},
          {"total_numel", l.total_numel},
          {"largest_region_numel", l.largest_region_numel},
          {"largest_layer_numel", l.largest_layer_numel},
          {"dtype", static_cast<int>(p.dtype)},
          {"optimizer", {p.optimizer.beta1, p.optimizer.beta2, p.optimizer.eps, p.optimizer.weight_decay,
                         p.optimizer.max_grad_norm, static_cast<double>(p.optimizer.passes)}},
          {"updates_applied", p.updates_applied},
          {"tier", {static_cast<int>(p.tier.mode), p.tier.paths, p.tier.tag, static_cast<int>(p.tier.io)}}};
}

TrainPlan from_json(const json& j) {
  TrainPlan p;
  ParamLayout& l = p.layout;
  for (const json& r : j.at("regions")) {
    Region region{static_cast<RegionKind>(r.at(0).get<int>()), r.at(1).get<int64_t>(), {}, r.at(2).get<int64_t>(), {}};
    for (const json& s : r.at(3))
      region.params.push_back({s.at(0).get<std::string>(), s.at(1).get<std::vector<int64_t>>(), s.at(2).get<int64_t>(),
                               s.at(3).get<int64_t>(), s.at(4).get<bool>(), static_cast<InitKind>(s.at(5).get<int>()),
                               {s.at(6).get<int64_t>(), s.at(7).get<std::vector<int64_t>>()},
                               {s.at(8).get<int64_t>(), s.at(9).get<bool>()}});
    const auto offsets = r.at(4).get<std::vector<int64_t>>();
    size_t k = 0;
    each_offset(region.offsets, [&](int64_t& v) { v = offsets.at(k++); });
    l.regions.push_back(std::move(region));
  }
  l.head = {j.at("head").at(0).get<int64_t>(), j.at("head").at(1).get<int64_t>()};
  l.total_numel = j.at("total_numel").get<int64_t>();
  l.largest_region_numel = j.at("largest_region_numel").get<int64_t>();
  l.largest_layer_numel = j.at("largest_layer_numel").get<int64_t>();
  p.dtype = static_cast<DType>(j.at("dtype").get<int>());
  const auto o = j.at("optimizer").get<std::vector<double>>();
  p.optimizer = {o[0], o[1], o[2], o[3], o[4], static_cast<UpdatePasses>(static_cast<int>(o[5]))};
  p.updates_applied = j.at("updates_applied").get<int64_t>();
  p.tier = {static_cast<OffloadMode>(j.at("tier").at(0).get<int>()), j.at("tier").at(1).get<std::vector<std::string>>(),
            j.at("tier").at(2).get<std::string>(), static_cast<TierIoChoice>(j.at("tier").at(3).get<int>())};
  return p;
}

}  // namespace

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

void broadcast_train_plan(const TrainPlan& plan) {
  const std::string text = to_json(plan).dump();
  unsigned long long size = text.size();
  MT_CHECK_MPI(MPI_Bcast(&size, 1, MPI_UNSIGNED_LONG_LONG, 0, dist::context().node));
  MT_CHECK_MPI(MPI_Bcast(const_cast<char*>(text.data()), static_cast<int>(size), MPI_CHAR, 0, dist::context().node));
}

TrainPlan receive_train_plan() {
  unsigned long long size = 0;
  MT_CHECK_MPI(MPI_Bcast(&size, 1, MPI_UNSIGNED_LONG_LONG, 0, dist::context().node));
  std::string text(size, '\0');
  MT_CHECK_MPI(MPI_Bcast(text.data(), static_cast<int>(size), MPI_CHAR, 0, dist::context().node));
  return from_json(json::parse(text));
}

}  // namespace mt
