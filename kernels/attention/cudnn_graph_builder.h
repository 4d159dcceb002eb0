// One cuDNN backend operation graph, built descriptor by descriptor (tensors, pointwise, matmul, reduction and reshape
// operations), then its execution plan from the heuristics' engine configs, or from a given config (the engine
// survey). Invariant: the first failing cuDNN call is kept with the descriptor and attribute it concerns, and every
// later call does nothing; the builder owns every descriptor it made and destroys them, the last made first.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/attention/cudnn_attention.h"

namespace mt::cuda {

// A cuDNN status as text, with cuDNN's last error message where it has one.
std::string cudnn_message(cudnnStatus_t st);

// A pass-by-value scalar of a graph: its tensor's uid and its value.
struct CudnnScalar {
  int64_t uid;
  const void* value;  // host memory the CudnnGraphBuilder owns
};

struct CudnnTensorInfo {
  std::vector<int64_t> dims, strides;
  cudnnDataType_t type;
  int64_t ragged = -1;  // the uid of the tensor of its sequences' offsets (elements), -1 for none
};

// One operation of a graph as it was added (the order is a topological one): what reads the graph back, as the tests'
// host interpreter of it does.
struct CudnnOpRecord {
  enum Kind { pointwise, pointwise_backward, matmul, reduction, reshape };
  Kind kind;
  int64_t mode = 0;         // cudnnPointwiseMode_t or cudnnReduceTensorOp_t
  std::vector<int64_t> in;  // pointwise: x, b, t; pointwise_backward: dy, x; matmul: a, b and the m, n, k overrides;
                            // reduction and reshape: x (-1: no such input)
  int64_t out = -1;
  int64_t axis = -1;  // GEN_INDEX's
};

class CudnnGraphBuilder {
 public:
  CudnnGraphBuilder(cudnnHandle_t handle, int scalar_rank) : handle_(handle), scalar_rank_(scalar_rank) {}
  ~CudnnGraphBuilder();  // destroys every descriptor it made, the last made first
  CudnnGraphBuilder(const CudnnGraphBuilder&) = delete;
  CudnnGraphBuilder& operator=(const CudnnGraphBuilder&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  void check(cudnnStatus_t st, const std::string& what);
  cudnnBackendDescriptor_t create(cudnnBackendDescriptorType_t type, const std::string& what);
  void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type,
           int64_t count, const void* value, const std::string& what);
  void finalize(cudnnBackendDescriptor_t d, const std::string& what);
  // One descriptor-valued attribute of an operation: its cuDNN name (for a failure's message) and value.
  struct Link {
    cudnnBackendAttributeName_t attr;
    const char* name;
    cudnnBackendDescriptor_t value;
  };
  // An operation descriptor of `type` (named type_name) with each link set in order, the links whose value is null
  // left unset, finalized and added to the graph.
  void operation(cudnnBackendDescriptorType_t type, const char* type_name, std::initializer_list<Link> links,
                 const std::string& what);
  // The tensor descriptor of uid x, null for -1 (an operation's optional port).
  cudnnBackendDescriptor_t port(int64_t x) const { return x >= 0 ? tensors_.at(x) : nullptr; }

  // A tensor descriptor; returns its uid.
  // ragged: the uid of the tensor of its sequences' offsets (elements), -1 for none.
  int64_t tensor(int64_t uid, const std::string& name, cudnnDataType_t type, std::vector<int64_t> dims,
                 std::vector<int64_t> strides, bool is_virtual, bool by_value = false, int64_t ragged = -1);
  int64_t io(int64_t uid, const std::string& name, cudnnDataType_t type, std::vector<int64_t> dims,
             std::vector<int64_t> strides, int64_t ragged = -1);
  // A virtual tensor with the dims and strides of x (or those given).
  int64_t virt(const std::string& name, cudnnDataType_t type, int64_t like);
  int64_t virt(const std::string& name, cudnnDataType_t type, std::vector<int64_t> dims, std::vector<int64_t> strides,
               int64_t ragged = -1);
  // A pass-by-value scalar (dims {1} as cudnn-frontend makes them, or all-ones of rank scalar_rank); its value
  // travels in every variant pack.
  int64_t scalar_f32(const std::string& name, float value);

  // y = mode(x[, b[, t]]) elementwise; compute: the pointwise descriptor's math precision.
  void pointwise(const std::string& name, cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t t, int64_t y,
                 cudnnDataType_t compute = CUDNN_DATA_FLOAT, int64_t axis = -1);
  // dx = mode(dy, x): an activation's backward (TANH_BWD: dx = dy·(1 − tanh²x)), ports as cudnn-frontend sets them.
  void pointwise_backward(const std::string& name, cudnnPointwiseMode_t mode, int64_t dy, int64_t x, int64_t dx);
  // c = a·b over the last two dims (batched over the first two, broadcast where a dim is 1 or divides); the
  // overrides are [b,1,1,1] int32 tensors of per-batch row/column/inner counts (-1: none).
  void matmul(const std::string& name, int64_t a, int64_t b, int64_t c, int64_t m_override, int64_t n_override,
              int64_t k_override);
  // y = reduce(x) over the dims where y has 1 (or fewer heads: a GQA group sum).
  void reduction(const std::string& name, cudnnReduceTensorOp_t mode, int64_t x, int64_t y);
  // y = x viewed with y's dims and strides (a transpose without data movement).
  void reshape(const std::string& name, int64_t x, int64_t y);

  // The operation graph, the heuristics' engine configs (mode A, then fallback) and the first config whose
  // execution plan finalizes (skipping engines noted non-deterministic when deterministic). Returns the plan.
  cudnnBackendDescriptor_t plan(bool deterministic, CudnnPlanInfo& info);

  // Every engine config the heuristics offer for the finalized graph (modes A and FALLBACK, in order), and after
  // them, for the first one that determinism allows, its one-knob variations: each knob of its engine over the
  // knob's range (at most 64 values a knob), the others as the heuristics chose them. The probe's engine survey.
  std::vector<CudnnEngineConfig> survey(bool deterministic);

  // The execution plan of an engine config made from c (engine and knob choices), or nullptr (error() says why).
  cudnnBackendDescriptor_t plan_for(const CudnnEngineConfig& c, CudnnPlanInfo& info);

  // The pass-by-value scalars every variant pack of this graph carries.
  const std::vector<CudnnScalar>& scalars() const { return scalars_; }
  // The uids of the graph's device tensors (neither virtual nor by value), ascending: what a variant pack binds
  // besides the scalars.
  const std::set<int64_t>& device_uids() const { return device_uids_; }
  // The operations in the order they were added, and a tensor's dims, strides, type and offsets.
  const std::vector<CudnnOpRecord>& operations() const { return records_; }
  const CudnnTensorInfo& tensor_info(int64_t uid) const { return info_.at(uid); }

 private:
  // The descriptors an attribute of d holds (at most `most`, each created as `type`); empty, with error() set, where
  // the call fails.
  std::vector<cudnnBackendDescriptor_t> descriptors(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr,
                                                    cudnnBackendDescriptorType_t type, int64_t most,
                                                    const std::string& what);
  // One value of an attribute of d (T{} where the call fails, with error() set).
  template <typename T>
  T value_of(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type,
             const std::string& what);

  // The heuristics' engine configs for the finalized graph in one mode (empty, with error() set, where it fails).
  std::vector<cudnnBackendDescriptor_t> heuristics(cudnnBackendHeurMode_t mode);

  // A config's engine (global index, numerical notes) and knob choices.
  CudnnEngineConfig describe(cudnnBackendDescriptor_t config, const std::string& c);

  // An engine of the finalized graph by its global index.
  cudnnBackendDescriptor_t engine_of(int64_t index, const std::string& what);

  // The knobs an engine of the graph takes, with their ranges (empty where it cannot say).
  std::vector<CudnnKnobRange> knob_ranges(int64_t index);

  // The execution plan of a config described as c, with its engine, knobs, notes and workspace in info; nullptr
  // (error() says why) where the engine refuses the graph.
  cudnnBackendDescriptor_t execution_plan(cudnnBackendDescriptor_t config, const CudnnEngineConfig& c,
                                          CudnnPlanInfo& info);

  struct Value {
    alignas(8) unsigned char bytes[8];
  };
  cudnnHandle_t handle_;
  int scalar_rank_;
  cudnnBackendDescriptor_t graph_ = nullptr;  // the operation graph, once plan() made it
  std::string error_;
  std::vector<cudnnBackendDescriptor_t> owned_, ops_;
  std::map<int64_t, cudnnBackendDescriptor_t> tensors_;
  std::map<int64_t, CudnnTensorInfo> info_;
  std::deque<Value> values_;  // stable addresses
  std::vector<CudnnScalar> scalars_;
  std::set<int64_t> device_uids_;
  std::vector<CudnnOpRecord> records_;
  int64_t next_uid_ = 100;
};

}  // namespace mt::cuda
