// The cuDNN operation-graph builder (see cudnn_graph_builder.h).
#include "kernels/attention/cudnn_graph_builder.h"

#include <cstring>

#include "core/error.h"

// An operation's type and a link, each with its cuDNN name as a failure names it.
#define MT_CUDNN_TYPE(type) type, #type
#define MT_CUDNN_LINK(attr, value) \
  Link { attr, #attr, value }

namespace mt::cuda {

std::string cudnn_message(cudnnStatus_t st) {
  char last[1024] = {0};
  cudnnGetLastErrorString(last, sizeof last);
  return last[0] != 0 ? MT_FORMAT("{} ({})", cudnnGetErrorString(st), last) : std::string(cudnnGetErrorString(st));
}

CudnnGraphBuilder::~CudnnGraphBuilder() {
  for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
}

void CudnnGraphBuilder::check(cudnnStatus_t st, const std::string& what) {
  if (st != CUDNN_STATUS_SUCCESS && error_.empty()) error_ = MT_FORMAT("{}: {}", what, cudnn_message(st));
}

cudnnBackendDescriptor_t CudnnGraphBuilder::create(cudnnBackendDescriptorType_t type, const std::string& what) {
  if (!ok()) return nullptr;
  cudnnBackendDescriptor_t d = nullptr;
  check(cudnnBackendCreateDescriptor(type, &d), what + " cudnnBackendCreateDescriptor");
  if (d) owned_.push_back(d);
  return d;
}

void CudnnGraphBuilder::set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr,
                            cudnnBackendAttributeType_t type, int64_t count, const void* value,
                            const std::string& what) {
  if (!ok()) return;
  check(cudnnBackendSetAttribute(d, attr, type, count, value), what);
}

void CudnnGraphBuilder::finalize(cudnnBackendDescriptor_t d, const std::string& what) {
  if (!ok()) return;
  check(cudnnBackendFinalize(d), what + " cudnnBackendFinalize");
}

void CudnnGraphBuilder::operation(cudnnBackendDescriptorType_t type, const char* type_name,
                                  std::initializer_list<Link> links, const std::string& what) {
  cudnnBackendDescriptor_t op = create(type, what);
  for (const Link& l : links)
    if (l.value != nullptr) set(op, l.attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &l.value, what + " " + l.name);
  finalize(op, what + " " + type_name);
  ops_.push_back(op);
}

int64_t CudnnGraphBuilder::tensor(int64_t uid, const std::string& name, cudnnDataType_t type, std::vector<int64_t> dims,
                                  std::vector<int64_t> strides, bool is_virtual, bool by_value, int64_t ragged) {
  const std::string what = "CUDNN_BACKEND_TENSOR_DESCRIPTOR '" + name + "'";
  cudnnBackendDescriptor_t d = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
  const int64_t n = static_cast<int64_t>(dims.size()), alignment = 16;
  set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, what + " CUDNN_ATTR_TENSOR_DATA_TYPE");
  set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, n, dims.data(), what + " CUDNN_ATTR_TENSOR_DIMENSIONS");
  set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, n, strides.data(), what + " CUDNN_ATTR_TENSOR_STRIDES");
  set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, what + " CUDNN_ATTR_TENSOR_UNIQUE_ID");
  set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, what + " CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT");
  const bool yes = true;
  if (is_virtual)
    set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes, what + " CUDNN_ATTR_TENSOR_IS_VIRTUAL");
  if (by_value)
    set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes, what + " CUDNN_ATTR_TENSOR_IS_BY_VALUE");
  if (ragged >= 0)
    set(d, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tensors_.at(ragged),
        what + " CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC");
  finalize(d, what);
  tensors_[uid] = d;
  if (!is_virtual && !by_value) device_uids_.insert(uid);
  info_[uid] = CudnnTensorInfo{std::move(dims), std::move(strides), type, ragged};
  return uid;
}

int64_t CudnnGraphBuilder::io(int64_t uid, const std::string& name, cudnnDataType_t type, std::vector<int64_t> dims,
                              std::vector<int64_t> strides, int64_t ragged) {
  return tensor(uid, name, type, std::move(dims), std::move(strides), false, false, ragged);
}

int64_t CudnnGraphBuilder::virt(const std::string& name, cudnnDataType_t type, int64_t like) {
  const CudnnTensorInfo& i = info_.at(like);
  return tensor(next_uid_++, name, type, i.dims, i.strides, true);
}

int64_t CudnnGraphBuilder::virt(const std::string& name, cudnnDataType_t type, std::vector<int64_t> dims,
                                std::vector<int64_t> strides, int64_t ragged) {
  return tensor(next_uid_++, name, type, std::move(dims), std::move(strides), true, false, ragged);
}

int64_t CudnnGraphBuilder::scalar_f32(const std::string& name, float value) {
  values_.push_back({});
  std::memcpy(values_.back().bytes, &value, sizeof value);
  const std::vector<int64_t> ones(static_cast<size_t>(scalar_rank_), 1);
  const int64_t uid = tensor(next_uid_++, name, CUDNN_DATA_FLOAT, ones, ones, false, true);
  scalars_.push_back(CudnnScalar{uid, values_.back().bytes});
  return uid;
}

void CudnnGraphBuilder::pointwise(const std::string& name, cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t t,
                                  int64_t y, cudnnDataType_t compute, int64_t axis) {
  const std::string what = "pointwise '" + name + "'";
  records_.push_back({CudnnOpRecord::pointwise, mode, {x, b, t}, y, axis});
  cudnnBackendDescriptor_t pw = create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
  set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what + " CUDNN_ATTR_POINTWISE_MODE");
  set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute, what + " CUDNN_ATTR_POINTWISE_MATH_PREC");
  if (mode == CUDNN_POINTWISE_GEN_INDEX)
    set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, what + " CUDNN_ATTR_POINTWISE_AXIS");
  finalize(pw, what + " CUDNN_BACKEND_POINTWISE_DESCRIPTOR");
  operation(MT_CUDNN_TYPE(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR),
            {MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, tensors_.at(x)),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, port(b)),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, port(t)),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, tensors_.at(y))},
            what);
}

void CudnnGraphBuilder::pointwise_backward(const std::string& name, cudnnPointwiseMode_t mode, int64_t dy, int64_t x,
                                           int64_t dx) {
  const std::string what = "pointwise '" + name + "'";
  records_.push_back({CudnnOpRecord::pointwise_backward, mode, {dy, x}, dx});
  cudnnBackendDescriptor_t pw = create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what + " CUDNN_ATTR_POINTWISE_MODE");
  set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute, what + " CUDNN_ATTR_POINTWISE_MATH_PREC");
  finalize(pw, what + " CUDNN_BACKEND_POINTWISE_DESCRIPTOR");
  operation(MT_CUDNN_TYPE(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR),
            {MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, tensors_.at(x)),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, tensors_.at(dy)),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, tensors_.at(dx))},
            what);
}

void CudnnGraphBuilder::matmul(const std::string& name, int64_t a, int64_t b, int64_t c, int64_t m_override,
                               int64_t n_override, int64_t k_override) {
  const std::string what = "matmul '" + name + "'";
  records_.push_back({CudnnOpRecord::matmul, 0, {a, b, m_override, n_override, k_override}, c});
  cudnnBackendDescriptor_t mm = create(CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, what + " CUDNN_ATTR_MATMUL_COMP_TYPE");
  finalize(mm, what + " CUDNN_BACKEND_MATMUL_DESCRIPTOR");
  operation(MT_CUDNN_TYPE(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR),
            {MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_MATMUL_ADESC, tensors_.at(a)),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_MATMUL_BDESC, tensors_.at(b)),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_MATMUL_CDESC, tensors_.at(c)),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, port(m_override)),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, port(n_override)),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, port(k_override))},
            what);
}

void CudnnGraphBuilder::reduction(const std::string& name, cudnnReduceTensorOp_t mode, int64_t x, int64_t y) {
  const std::string what = "reduction '" + name + "'";
  records_.push_back({CudnnOpRecord::reduction, mode, {x}, y});
  cudnnBackendDescriptor_t rd = create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  set(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, what + " CUDNN_ATTR_REDUCTION_COMP_TYPE");
  set(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode,
      what + " CUDNN_ATTR_REDUCTION_OPERATOR");
  finalize(rd, what + " CUDNN_BACKEND_REDUCTION_DESCRIPTOR");
  operation(MT_CUDNN_TYPE(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR),
            {MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, tensors_.at(x)),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, tensors_.at(y))},
            what);
}

void CudnnGraphBuilder::reshape(const std::string& name, int64_t x, int64_t y) {
  records_.push_back({CudnnOpRecord::reshape, 0, {x}, y});
  operation(MT_CUDNN_TYPE(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR),
            {MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, tensors_.at(x)),
             MT_CUDNN_LINK(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, tensors_.at(y))},
            "reshape '" + name + "'");
}

cudnnBackendDescriptor_t CudnnGraphBuilder::plan(bool deterministic, CudnnPlanInfo& info) {
  const std::string g = "CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR";
  graph_ = create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, g);
  set(graph_, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops_.size()),
      ops_.data(), g + " CUDNN_ATTR_OPERATIONGRAPH_OPS");
  set(graph_, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_,
      g + " CUDNN_ATTR_OPERATIONGRAPH_HANDLE");
  finalize(graph_, MT_FORMAT("{} ({} operations)", g, ops_.size()));
  std::string refusals;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    if (!ok()) break;
    std::vector<cudnnBackendDescriptor_t> configs = heuristics(mode);
    if (!ok()) {
      if (mode == CUDNN_HEUR_MODE_A) {  // the fallback list may still have an engine
        refusals += error_ + "; ";
        error_.clear();
        continue;
      }
      break;
    }
    info.candidates += static_cast<int64_t>(configs.size());
    for (size_t i = 0; i < configs.size(); ++i) {
      const std::string c = MT_FORMAT("heuristics mode {} config {}", mode == CUDNN_HEUR_MODE_A ? "A" : "FALLBACK", i);
      const CudnnEngineConfig described = describe(configs[i], c);
      if (!ok()) {  // an engine that cannot describe itself is passed over
        refusals += error_ + "; ";
        error_.clear();
        continue;
      }
      info.offered +=
          MT_FORMAT("{}{}{}", info.offered.empty() ? "" : " ", described.engine, described.nondeterministic ? "n" : "");
      if (deterministic && described.nondeterministic) {
        refusals += MT_FORMAT("engine {}: non-deterministic; ", described.engine);
        continue;
      }
      if (cudnnBackendDescriptor_t p = execution_plan(configs[i], described, info)) return p;
      refusals += error_ + "; ";  // this engine refused the graph; the next may take it
      error_.clear();
    }
  }
  if (ok())
    error_ = MT_FORMAT("no engine config finalized ({} offered): {}", info.candidates, refusals);
  else
    error_ = refusals + error_;
  return nullptr;
}

std::vector<CudnnEngineConfig> CudnnGraphBuilder::survey(bool deterministic) {
  std::vector<CudnnEngineConfig> out;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    const std::vector<cudnnBackendDescriptor_t> configs = heuristics(mode);
    for (size_t i = 0; ok() && i < configs.size(); ++i) out.push_back(describe(configs[i], "survey config"));
    error_.clear();
  }
  const auto first = std::find_if(out.begin(), out.end(),
                                  [&](const CudnnEngineConfig& c) { return !deterministic || !c.nondeterministic; });
  if (first == out.end()) return out;
  const CudnnEngineConfig base = *first;
  for (const CudnnKnobRange& r : knob_ranges(base.engine)) {
    const int64_t stride = std::max<int64_t>(r.stride, 1);
    for (int64_t value = r.minimum, n = 0; value <= r.maximum && n < 64; value += stride, ++n) {
      CudnnEngineConfig v = base;
      auto it = std::find_if(v.knobs.begin(), v.knobs.end(), [&](const CudnnKnob& k) { return k.type == r.type; });
      if (it != v.knobs.end() && it->value == value) continue;  // the heuristics' own choice
      if (it != v.knobs.end())
        it->value = value;
      else
        v.knobs.push_back({r.type, value});
      out.push_back(std::move(v));
    }
  }
  error_.clear();
  return out;
}

cudnnBackendDescriptor_t CudnnGraphBuilder::plan_for(const CudnnEngineConfig& c, CudnnPlanInfo& info) {
  error_.clear();
  const std::string what = MT_FORMAT("engine {} config {}", c.engine, c.describe());
  cudnnBackendDescriptor_t engine = engine_of(c.engine, what);
  std::vector<cudnnBackendDescriptor_t> choices;
  for (const CudnnKnob& k : c.knobs) {
    cudnnBackendDescriptor_t kc = create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, what + " knob choice");
    const auto type = static_cast<cudnnBackendKnobType_t>(k.type);
    set(kc, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &type,
        what + " CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE");
    set(kc, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &k.value,
        what + " CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE");
    finalize(kc, what + " knob choice");
    choices.push_back(kc);
  }
  cudnnBackendDescriptor_t config = create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, what);
  set(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engine,
      what + " CUDNN_ATTR_ENGINECFG_ENGINE");
  if (!choices.empty())
    set(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(choices.size()),
        choices.data(), what + " CUDNN_ATTR_ENGINECFG_KNOB_CHOICES");
  finalize(config, what + " CUDNN_BACKEND_ENGINECFG_DESCRIPTOR");
  if (!ok()) return nullptr;
  return execution_plan(config, c, info);
}

std::vector<cudnnBackendDescriptor_t> CudnnGraphBuilder::descriptors(cudnnBackendDescriptor_t d,
                                                                     cudnnBackendAttributeName_t attr,
                                                                     cudnnBackendDescriptorType_t type, int64_t most,
                                                                     const std::string& what) {
  std::vector<cudnnBackendDescriptor_t> out(static_cast<size_t>(most));
  for (auto& x : out) x = create(type, what);
  int64_t got = 0;
  if (ok() && most > 0)
    check(cudnnBackendGetAttribute(d, attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, most, &got, out.data()), what);
  if (!ok()) return {};
  out.resize(static_cast<size_t>(got));
  return out;
}

template <typename T>
T CudnnGraphBuilder::value_of(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr,
                              cudnnBackendAttributeType_t type, const std::string& what) {
  T value{};
  int64_t n = 0;
  if (ok()) check(cudnnBackendGetAttribute(d, attr, type, 1, &n, &value), what);
  return value;
}

std::vector<cudnnBackendDescriptor_t> CudnnGraphBuilder::heuristics(cudnnBackendHeurMode_t mode) {
  const std::string h =
      MT_FORMAT("CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR (mode {})", mode == CUDNN_HEUR_MODE_A ? "A" : "FALLBACK");
  cudnnBackendDescriptor_t heur = create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, h);
  set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph_,
      h + " CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH");
  set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, h + " CUDNN_ATTR_ENGINEHEUR_MODE");
  finalize(heur, h);
  int64_t count = 0;
  if (ok())
    check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                   nullptr),
          h + " CUDNN_ATTR_ENGINEHEUR_RESULTS (count)");
  return descriptors(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, ok() ? count : 0,
                     h + " CUDNN_ATTR_ENGINEHEUR_RESULTS");
}

CudnnEngineConfig CudnnGraphBuilder::describe(cudnnBackendDescriptor_t config, const std::string& c) {
  CudnnEngineConfig out;
  const std::vector<cudnnBackendDescriptor_t> engine = descriptors(
      config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_BACKEND_ENGINE_DESCRIPTOR, 1, c + " CUDNN_ATTR_ENGINECFG_ENGINE");
  if (engine.size() != 1) return out;
  out.engine = value_of<int64_t>(engine[0], CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64,
                                 c + " CUDNN_ATTR_ENGINE_GLOBAL_INDEX");
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t n_notes = 0;
  if (ok())
    check(cudnnBackendGetAttribute(engine[0], CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                   CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n_notes, notes),
          c + " CUDNN_ATTR_ENGINE_NUMERICAL_NOTE");
  for (int64_t j = 0; ok() && j < n_notes; ++j) {
    out.notes += MT_FORMAT("{}numerical:{}", out.notes.empty() ? "" : ",", static_cast<int>(notes[j]));
    out.nondeterministic |= notes[j] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
  }
  for (cudnnBackendDescriptor_t k :
       descriptors(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR,
                   CUDNN_KNOB_TYPE_COUNTS, c + " CUDNN_ATTR_ENGINECFG_KNOB_CHOICES")) {
    const auto type = value_of<cudnnBackendKnobType_t>(k, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE,
                                                       c + " CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE");
    out.knobs.push_back(
        {static_cast<int64_t>(type), value_of<int64_t>(k, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64,
                                                       c + " CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE")});
  }
  return out;
}

cudnnBackendDescriptor_t CudnnGraphBuilder::engine_of(int64_t index, const std::string& what) {
  cudnnBackendDescriptor_t engine = create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, what + " CUDNN_BACKEND_ENGINE_DESCRIPTOR");
  set(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph_,
      what + " CUDNN_ATTR_ENGINE_OPERATION_GRAPH");
  set(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &index, what + " CUDNN_ATTR_ENGINE_GLOBAL_INDEX");
  finalize(engine, what + " CUDNN_BACKEND_ENGINE_DESCRIPTOR");
  return engine;
}

std::vector<CudnnKnobRange> CudnnGraphBuilder::knob_ranges(int64_t index) {
  const std::string what = MT_FORMAT("engine {} knob info", index);
  std::vector<CudnnKnobRange> out;
  for (cudnnBackendDescriptor_t k : descriptors(engine_of(index, what), CUDNN_ATTR_ENGINE_KNOB_INFO,
                                                CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, CUDNN_KNOB_TYPE_COUNTS, what)) {
    CudnnKnobRange r;
    r.type = static_cast<int64_t>(
        value_of<cudnnBackendKnobType_t>(k, CUDNN_ATTR_KNOB_INFO_TYPE, CUDNN_TYPE_KNOB_TYPE, what + " type"));
    r.minimum = value_of<int64_t>(k, CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, CUDNN_TYPE_INT64, what + " minimum");
    r.maximum = value_of<int64_t>(k, CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, CUDNN_TYPE_INT64, what + " maximum");
    r.stride = value_of<int64_t>(k, CUDNN_ATTR_KNOB_INFO_STRIDE, CUDNN_TYPE_INT64, what + " stride");
    out.push_back(r);
  }
  return out;
}

cudnnBackendDescriptor_t CudnnGraphBuilder::execution_plan(cudnnBackendDescriptor_t config, const CudnnEngineConfig& c,
                                                           CudnnPlanInfo& info) {
  const std::string p = MT_FORMAT("CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR (engine {})", c.engine);
  cudnnBackendDescriptor_t plan = create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, p);
  set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_, p + " CUDNN_ATTR_EXECUTION_PLAN_HANDLE");
  set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &config,
      p + " CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG");
  finalize(plan, p);
  const auto bytes = value_of<int64_t>(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                       p + " CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE");
  if (!ok()) return nullptr;
  info.engine = c.engine;
  info.knobs = c.describe();
  info.workspace_bytes = bytes;
  info.notes = c.notes;
  return plan;
}

}  // namespace mt::cuda
