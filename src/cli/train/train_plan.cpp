// TrainPlan over MPI: serialised as JSON, broadcast as its length then its bytes (see train_plan.h).
#include "cli/train/train_plan.h"

#include <mpi.h>

#include <nlohmann/json.hpp>
#include <string>

#include "dist/check.h"
#include "dist/context.h"

namespace mt {
namespace {

using nlohmann::json;

json to_json(const TrainPlan& p) {
  const ParamLayout& l = p.layout;
  json regions = json::array();
  for (const Region& r : l.regions) {
    json params = json::array();
    for (const ParamSlot& s : r.params)
      params.push_back({s.hf_name, s.shape, s.offset, s.numel, s.weight_decay, static_cast<int>(s.init)});
    regions.push_back({static_cast<int>(r.kind), r.layer, r.numel, params});
  }
  const DecoderOffsets& d = l.decoder;
  return {{"regions", regions},
          {"decoder", {d.input_norm, d.q, d.q_bias, d.k, d.k_bias, d.v, d.v_bias, d.o, d.o_bias, d.q_norm, d.k_norm,
                       d.post_norm, d.gate, d.gate_bias, d.up, d.up_bias, d.down, d.down_bias}},
          {"head", {l.head.norm, l.head.lm_head}},
          {"total_numel", l.total_numel},
          {"largest_region_numel", l.largest_region_numel},
          {"dtype", static_cast<int>(p.dtype)},
          {"optimizer", {p.optimizer.beta1, p.optimizer.beta2, p.optimizer.eps, p.optimizer.weight_decay,
                         p.optimizer.max_grad_norm, static_cast<double>(p.optimizer.passes)}},
          {"updates_applied", p.updates_applied}};
}

TrainPlan from_json(const json& j) {
  TrainPlan p;
  ParamLayout& l = p.layout;
  for (const json& r : j.at("regions")) {
    Region region{static_cast<RegionKind>(r.at(0).get<int>()), r.at(1).get<int64_t>(), {}, r.at(2).get<int64_t>()};
    for (const json& s : r.at(3))
      region.params.push_back({s.at(0).get<std::string>(), s.at(1).get<std::vector<int64_t>>(), s.at(2).get<int64_t>(),
                               s.at(3).get<int64_t>(), s.at(4).get<bool>(), static_cast<InitKind>(s.at(5).get<int>())});
    l.regions.push_back(std::move(region));
  }
  const auto d = j.at("decoder").get<std::vector<int64_t>>();
  l.decoder = {d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15],
               d[16], d[17]};
  l.head = {j.at("head").at(0).get<int64_t>(), j.at("head").at(1).get<int64_t>()};
  l.total_numel = j.at("total_numel").get<int64_t>();
  l.largest_region_numel = j.at("largest_region_numel").get<int64_t>();
  p.dtype = static_cast<DType>(j.at("dtype").get<int>());
  const auto o = j.at("optimizer").get<std::vector<double>>();
  p.optimizer = {o[0], o[1], o[2], o[3], o[4], static_cast<UpdatePasses>(static_cast<int>(o[5]))};
  p.updates_applied = j.at("updates_applied").get<int64_t>();
  return p;
}

}  // namespace

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
