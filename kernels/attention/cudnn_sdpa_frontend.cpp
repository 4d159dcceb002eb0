// The SDPA graphs on cudnn-frontend (see cudnn_sdpa_frontend.h): tensors in BSHD rows (Q [b, h, S, d] at strides
// {S·h·d, d, h·d, 1}, K and V with the kv heads, V, O and their gradients with the value head dim), one SDPA or
// SDPA-backward node, then the frontend's validate, operation graph, heuristics, support check and plan build.
#include "kernels/attention/cudnn_sdpa_frontend.h"

#include <cudnn_frontend.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "core/error.h"

namespace mt::cuda {
namespace fe = cudnn_frontend;

float sdpa_scale(const AttnShape& s) {
  return s.scale > 0.f ? s.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
}

int64_t sdpa_window(const AttnShape& s) { return s.window > 0 && s.window < s.seq ? s.window : 0; }

namespace {

using Tensor = std::shared_ptr<fe::graph::Tensor_attributes>;
using Subgraph = std::shared_ptr<fe::graph::Graph>;

CudnnEngineConfig config_of(int64_t engine, const std::unordered_map<fe::KnobType_t, int64_t>& knobs) {
  CudnnEngineConfig c;
  c.engine = engine;
  for (const auto& [type, value] : knobs) {
    cudnnBackendKnobType_t cudnn_type{};
    if (fe::convert_to_backend_knob_type(type, cudnn_type) == CUDNN_STATUS_SUCCESS)
      c.knobs.push_back({static_cast<int64_t>(cudnn_type), value});
  }
  std::sort(c.knobs.begin(), c.knobs.end(), [](const CudnnKnob& a, const CudnnKnob& b) { return a.type < b.type; });
  return c;
}

std::unordered_map<fe::KnobType_t, int64_t> knobs_of(const CudnnEngineConfig& c) {
  std::unordered_map<fe::KnobType_t, int64_t> out;
  for (const CudnnKnob& k : c.knobs)
    out[fe::convert_from_backend_knob_type(static_cast<cudnnBackendKnobType_t>(k.type))] = k.value;
  return out;
}

// ALiBi (Baichuan 2) as the frontend's alibi_mask lowers it, with our slopes: slope_h · (col − row) added to the
// scores, the index difference in int32.
Tensor add_alibi(const Subgraph& g, const Tensor& x, const Tensor& slopes) {
  using fe::graph::Pointwise_attributes;
  auto index = [&](const char* name, int64_t axis) {
    Tensor i = g->pointwise(x, Pointwise_attributes()
                                   .set_name(name)
                                   .set_mode(fe::PointwiseMode_t::GEN_INDEX)
                                   .set_axis(axis)
                                   .set_compute_data_type(fe::DataType_t::INT32));
    i->set_data_type(fe::DataType_t::INT32);
    return i;
  };
  const Tensor row = index("gen_row_idx_alibi", 2), col = index("gen_col_idx_alibi", 3);
  Tensor rel = g->pointwise(col, row,
                            Pointwise_attributes()
                                .set_name("sub_col_row_alibi")
                                .set_mode(fe::PointwiseMode_t::SUB)
                                .set_compute_data_type(fe::DataType_t::INT32));
  rel->set_data_type(fe::DataType_t::INT32);
  const Tensor bias =
      g->pointwise(rel, slopes, Pointwise_attributes().set_name("mul_slope_alibi").set_mode(fe::PointwiseMode_t::MUL));
  return g->pointwise(x, bias, Pointwise_attributes().set_name("add_alibi").set_mode(fe::PointwiseMode_t::ADD));
}

// The graph of shape s (see cudnn_sdpa_frontend.h), its tensors and node, not yet validated; sm_version 0: the
// device's (the frontend reads it at validation), else that compute capability, set before the nodes copy it.
std::shared_ptr<fe::graph::Graph> make_graph(const AttnShape& s, const SdpaGraphSpec& spec, int sm_version) {
  using fe::graph::Tensor_attributes;
  const int64_t b = s.batch, S = s.seq, h = s.n_heads, hk = s.n_kv_heads, d = s.head_dim, dv = s.value_head_dim();
  const bool causal = spec.causal, padding = spec.padding, alibi = s.alibi_slopes != nullptr;
  const int64_t window = causal ? sdpa_window(s) : 0;  // a tile below the diagonal is unmasked
  auto g = std::make_shared<fe::graph::Graph>();
  if (sm_version > 0) g->set_sm_version(sm_version);
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto input = [&](Uid uid, const char* name, std::vector<int64_t> dims, std::vector<int64_t> strides,
                   fe::DataType_t type = fe::DataType_t::BFLOAT16) {
    return g->tensor(
        Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(strides).set_data_type(type));
  };
  // BSHD rows; ragged: each sequence's rows start at its offset (elements), not at b·S rows
  const std::vector<int64_t> q_dims{b, h, S, d}, q_strides{S * h * d, d, h * d, 1};
  const std::vector<int64_t> k_dims{b, hk, S, d}, k_strides{S * hk * d, d, hk * d, 1};
  const std::vector<int64_t> o_dims{b, h, S, dv}, o_strides{S * h * dv, dv, h * dv, 1};
  const std::vector<int64_t> v_dims{b, hk, S, dv}, v_strides{S * hk * dv, dv, hk * dv, 1};
  const std::vector<int64_t> stats_dims{b, h, S, 1}, stats_strides{h * S, S, 1, 1};
  const std::vector<int64_t> one{1, 1, 1, 1};
  Tensor q_ragged, kv_ragged;
  if (spec.ragged) {
    q_ragged = input(uid_q_ragged, "Q/O offsets", {b + 1, 1, 1, 1}, one, fe::DataType_t::INT32);
    kv_ragged = input(uid_kv_ragged, "K/V offsets", {b + 1, 1, 1, 1}, one, fe::DataType_t::INT32);
  }
  auto rows = [&](const Tensor& t, const Tensor& offsets) {
    if (offsets) t->set_ragged_offset(offsets);
    return t;
  };
  const Tensor Q = rows(input(uid_q, "Q", q_dims, q_strides), q_ragged);
  const Tensor K = rows(input(uid_k, "K", k_dims, k_strides), kv_ragged);
  const Tensor V = rows(input(uid_v, "V", v_dims, v_strides), kv_ragged);
  Tensor seq_q, seq_kv;
  if (padding) {
    seq_q = input(uid_seq_q, "seq_len_q", {b, 1, 1, 1}, one, fe::DataType_t::INT32);
    seq_kv = input(uid_seq_kv, "seq_len_kv", {b, 1, 1, 1}, one, fe::DataType_t::INT32);
  }
  // The soft-cap and ALiBi as our score modifier, which then builds the masks as well (1.32 refuses its mask
  // attributes beside a score modifier).
  const bool modified = s.softcap > 0.f || alibi;
  const Tensor slopes = alibi ? input(uid_alibi, "alibi slopes", {1, h, 1, 1}, {h, 1, 1, 1}, fe::DataType_t::FLOAT)
                              : Tensor{};
  const Tensor cap = s.softcap > 0.f ? std::make_shared<Tensor_attributes>(s.softcap) : Tensor{};
  auto softcap = std::make_shared<fe::graph::attn::score_modifiers::Softcap>();
  auto modifier = [=](Subgraph sg, Tensor x) {
    namespace mods = fe::graph::attn::score_modifiers;
    if (cap) x = softcap->forward(sg, x, cap);
    if (slopes) x = add_alibi(sg, x, slopes);  // after the soft-cap, as the CPU reference adds it
    if (seq_q) x = mods::padding_mask(sg, x, seq_kv, seq_q);
    if (causal)
      x = mods::sliding_window_mask(sg, x, fe::DiagonalAlignment_t::TOP_LEFT,
                                    window > 0 ? std::optional<int64_t>(window) : std::nullopt, int64_t{0}, 0, 0,
                                    nullptr, nullptr, nullptr, nullptr);
    return x;
  };
  auto masks = [&](auto& a) {
    if (modified) {
      a.set_score_mod(modifier);
      if (padding) a.set_seq_len_q(seq_q).set_seq_len_kv(seq_kv);
      return;
    }
    if (padding) a.set_padding_mask(true).set_seq_len_q(seq_q).set_seq_len_kv(seq_kv);
    if (causal) a.set_causal_mask(true);
    if (window > 0) a.set_diagonal_band_left_bound(static_cast<int>(window));
  };
  auto output = [&](const Tensor& t, Uid uid, const char* name, const std::vector<int64_t>& dims,
                    const std::vector<int64_t>& strides, const Tensor& offsets) {
    t->set_output(true).set_uid(uid).set_name(name).set_dim(dims).set_stride(strides);
    if (offsets) t->set_ragged_offset(offsets);
  };
  if (!spec.backward) {
    // the composite node (the runtime fusion engine's graph, as before the frontend), not AUTO's unified one where
    // this cuDNN has it: the same engines, workspace and bits as the graphs the plan's figures were measured on
    auto a = fe::graph::SDPA_attributes()
                 .set_name("sdpa")
                 .set_implementation(fe::AttentionImplementation_t::COMPOSITE)
                 .set_generate_stats(true)
                 .set_attn_scale(sdpa_scale(s));
    masks(a);
    if (spec.sinks) a.set_sink_token(input(uid_sinks, "sinks", {1, h, 1, 1}, {h, 1, 1, 1}, fe::DataType_t::FLOAT));
    auto [O, stats] = g->sdpa(Q, K, V, a);
    output(O, uid_o, "O", o_dims, o_strides, q_ragged);
    output(stats, uid_stats, "stats", stats_dims, stats_strides, nullptr);
    stats->set_data_type(fe::DataType_t::FLOAT);
  } else {
    const Tensor O = rows(input(uid_o, "O", o_dims, o_strides), q_ragged);
    const Tensor dO = rows(input(uid_do, "dO", o_dims, o_strides), q_ragged);
    const Tensor stats = input(uid_stats, "stats", stats_dims, stats_strides, fe::DataType_t::FLOAT);
    auto a = fe::graph::SDPA_backward_attributes()
                 .set_name("sdpa_backward")
                 .set_attn_scale(sdpa_scale(s))
                 .set_deterministic_algorithm(spec.deterministic);
    masks(a);
    if (cap)
      a.set_score_mod_bprop([=](Subgraph sg, Tensor dx) { return softcap->backward(sg, dx, cap); });
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, stats, a);
    output(dQ, uid_dq, "dQ", q_dims, q_strides, q_ragged);
    output(dK, uid_dk, "dK", k_dims, k_strides, kv_ragged);
    output(dV, uid_dv, "dV", v_dims, v_strides, kv_ragged);
  }
  return g;
}

}  // namespace

struct SdpaGraph::Impl {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t plan_index = -1;               // the plan that runs (an index of the frontend's plan list)
  std::vector<CudnnEngineConfig> offered;  // the heuristics' configs, in order (nondeterministic flags: survey())
  bool deterministic = true;             // non-deterministic engines are deselected
};

SdpaGraph::~SdpaGraph() = default;

std::string sdpa_lowering_error(const AttnShape& s, const SdpaGraphSpec& spec, int sm_version) {
  const std::shared_ptr<fe::graph::Graph> g = make_graph(s, spec, sm_version);
  fe::error_t e = g->validate();
  if (e.is_good()) e = g->build_operation_graph(static_cast<cudnnHandle_t>(nullptr));
  return e.is_good() ? std::string{} : e.get_message();
}

SdpaGraph::SdpaGraph(cudnnHandle_t handle, const AttnShape& s, const SdpaGraphSpec& spec, CudnnPlanInfo& info)
    : impl_(std::make_unique<Impl>()) {
  const std::shared_ptr<fe::graph::Graph> g = make_graph(s, spec, 0);
  impl_->graph = g;
  impl_->deterministic = spec.deterministic || !spec.backward;
  auto failed = [&](fe::error_t e, const char* step) {
    if (e.is_good()) return false;
    info.error = MT_FORMAT("cudnn-frontend {}: {}", step, e.get_message());
    return true;
  };
  if (failed(g->validate(), "validate") || failed(g->build_operation_graph(handle), "build_operation_graph") ||
      failed(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "create_execution_plans"))
    return;
  const int64_t count = g->get_execution_plan_count();
  info.candidates = count;
  for (int64_t i = 0; i < count; ++i) {
    int64_t engine = -1;
    std::unordered_map<fe::KnobType_t, int64_t> knobs;
    if (g->get_engine_and_knobs_at_index(i, engine, knobs).is_good()) impl_->offered.push_back(config_of(engine, knobs));
  }
  if (impl_->deterministic) g->deselect_numeric_notes({fe::NumericalNote_t::NONDETERMINISTIC});
  if (failed(g->check_support(), "check_support") ||
      failed(g->build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans"))
    return;
  // The plan the frontend chose: its name among the list's
  std::string chosen;
  if (failed(g->get_plan_name(chosen), "get_plan_name")) return;
  for (int64_t i = 0; i < count && impl_->plan_index < 0; ++i) {
    std::string name;
    if (g->get_plan_name_at_index(i, name).is_good() && name == chosen) impl_->plan_index = i;
  }
  if (impl_->plan_index < 0) {
    info.error = MT_FORMAT("cudnn-frontend: the built plan {} is not in its list", chosen);
    return;
  }
  for (int64_t i = 0; i <= impl_->plan_index && i < static_cast<int64_t>(impl_->offered.size()); ++i)
    info.offered += MT_FORMAT("{}{}", info.offered.empty() ? "" : " ", impl_->offered[i].engine);
  std::string error;
  const CudnnEngineConfig c =
      impl_->plan_index < static_cast<int64_t>(impl_->offered.size()) ? impl_->offered[impl_->plan_index]
                                                                      : CudnnEngineConfig{};
  int64_t workspace = 0;
  if (failed(g->get_workspace_size(workspace), "get_workspace_size")) return;
  info.engine = c.engine;
  info.knobs = c.describe();
  info.notes = chosen;
  info.workspace_bytes = workspace;
  info.ok = true;
}

std::vector<CudnnEngineConfig> SdpaGraph::survey(bool deterministic) const {
  std::vector<CudnnEngineConfig> out = impl_->offered;
  // The deselected (non-deterministic) configs of a deterministic graph refuse to build with the frontend's
  // "Deselecting" message; the others build here (the survey times each of them next anyway).
  for (size_t i = 0; i < out.size(); ++i) {
    if (!impl_->deterministic) break;
    fe::error_t e = impl_->graph->build_plan_at_index(static_cast<int64_t>(i));
    out[i].nondeterministic = e.is_bad() && e.get_message().find("Deselect") != std::string::npos;
  }
  const auto first = std::find_if(out.begin(), out.end(),
                                  [&](const CudnnEngineConfig& c) { return !deterministic || !c.nondeterministic; });
  if (first == out.end()) return out;
  const CudnnEngineConfig base = *first;
  std::vector<fe::Knob> ranges;
  if (impl_->graph->get_knobs_for_engine(base.engine, ranges).is_bad()) return out;
  for (const fe::Knob& r : ranges) {
    cudnnBackendKnobType_t cudnn_type{};
    if (fe::convert_to_backend_knob_type(r.type, cudnn_type) != CUDNN_STATUS_SUCCESS) continue;
    const auto type = static_cast<int64_t>(cudnn_type);
    const int64_t stride = std::max<int64_t>(r.stride, 1);
    for (int64_t value = r.minValue, n = 0; value <= r.maxValue && n < 64; value += stride, ++n) {
      CudnnEngineConfig v = base;
      auto it = std::find_if(v.knobs.begin(), v.knobs.end(), [&](const CudnnKnob& k) { return k.type == type; });
      if (it != v.knobs.end() && it->value == value) continue;  // the heuristics' own choice
      if (it != v.knobs.end())
        it->value = value;
      else
        v.knobs.push_back({type, value});
      out.push_back(std::move(v));
    }
  }
  return out;
}

bool SdpaGraph::use_config(const CudnnEngineConfig& c, CudnnPlanInfo& info, std::string& error) {
  fe::graph::Graph& g = *impl_->graph;
  auto failed = [&](fe::error_t e) {
    if (e.is_good()) return false;
    error = e.get_message();
    return true;
  };
  if (failed(g.create_execution_plan(c.engine, knobs_of(c)))) return false;
  const int64_t index = g.get_execution_plan_count() - 1;  // the config just added
  int64_t workspace = 0;
  if (failed(g.build_plan_at_index(index)) || failed(g.get_workspace_size_plan_at_index(index, workspace)))
    return false;
  impl_->plan_index = index;
  info.engine = c.engine;
  info.knobs = c.describe();
  info.notes.clear();
  info.workspace_bytes = workspace;
  return true;
}

void SdpaGraph::execute(cudnnHandle_t handle, std::unordered_map<int64_t, void*>& pack, void* workspace) const {
  fe::error_t e = impl_->graph->execute_plan_at_index(handle, pack, workspace, impl_->plan_index);
  MT_REQUIRE(e.is_good(), "cuDNN attention: cudnn-frontend execute: {}", e.get_message());
}

}  // namespace mt::cuda
