// The host interpreter of a cuDNN operation graph (see cudnn_graph_interpreter.h).
#ifdef MEGATRAIN_HAVE_CUDNN
#include "gpu/cudnn_graph_interpreter.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/error.h"

namespace mt::test {
namespace {

using mt::cuda::CudnnOpRecord;
using mt::cuda::CudnnTensorInfo;

// A tensor's dims and strides as four (a lower rank padded in front with dims of 1).
struct Dims4 {
  int64_t dims[4], strides[4];
};
Dims4 dims4(const CudnnTensorInfo& t) {
  Dims4 d{{1, 1, 1, 1}, {0, 0, 0, 0}};
  const size_t n = t.dims.size();
  MT_ASSERT(n <= 4, "the interpreter takes tensors of rank 4 at most");
  for (size_t i = 0; i < n; ++i) {
    d.dims[4 - n + i] = t.dims[i];
    d.strides[4 - n + i] = t.strides[i];
  }
  return d;
}

// The index of an input's element for an output's index along one dimension: the same, 0 where the input's is 1,
// else the output's consecutive groups (the input's dimension dividing the output's).
int64_t broadcast(int64_t out_index, int64_t out_dim, int64_t in_dim) {
  if (in_dim == out_dim) return out_index;
  if (in_dim == 1) return 0;
  MT_ASSERT(out_dim % in_dim == 0, "dimension {} does not divide {}", in_dim, out_dim);
  return out_index / (out_dim / in_dim);
}

// dx = dy·(1 − tanh²x): the one activation backward the graphs use.
float tanh_backward(const CudnnOpRecord& op, float dy, float x) {
  MT_ASSERT(op.mode == CUDNN_POINTWISE_TANH_BWD, "pointwise backward mode {} is not interpreted", op.mode);
  const float t = std::tanh(x);
  return dy * (1.f - t * t);
}

// y = mode(x, b, t) at an element's index (GEN_INDEX's value).
float pointwise_value(const CudnnOpRecord& op, float x, float b, float t, const int64_t* index) {
  switch (static_cast<cudnnPointwiseMode_t>(op.mode)) {
    case CUDNN_POINTWISE_ADD:
      return x + b;
    case CUDNN_POINTWISE_SUB:
      return x - b;
    case CUDNN_POINTWISE_MUL:
      return x * b;
    case CUDNN_POINTWISE_DIV:
      return x / b;
    case CUDNN_POINTWISE_MAX:
      return std::max(x, b);
    case CUDNN_POINTWISE_EXP:
      return std::exp(x);
    case CUDNN_POINTWISE_LOG:
      return std::log(x);
    case CUDNN_POINTWISE_TANH_FWD:
      return std::tanh(x);
    case CUDNN_POINTWISE_IDENTITY:
      return x;
    case CUDNN_POINTWISE_CMP_LT:
      return x < b;
    case CUDNN_POINTWISE_CMP_GE:
      return x >= b;
    case CUDNN_POINTWISE_CMP_GT:
      return x > b;
    case CUDNN_POINTWISE_LOGICAL_AND:
      return x != 0.f && b != 0.f;
    case CUDNN_POINTWISE_BINARY_SELECT:
      return t != 0.f ? x : b;
    case CUDNN_POINTWISE_GEN_INDEX:
      return static_cast<float>(index[op.axis]);
    default:
      MT_ASSERT(false, "pointwise mode {} is not interpreted", op.mode);
      return 0.f;
  }
}

// f(index) for every index of a 4-d tensor of dims, the last dimension fastest.
template <typename F>
void for_each_index(const int64_t dims[4], F&& f) {
  int64_t i[4];
  for (i[0] = 0; i[0] < dims[0]; ++i[0])
    for (i[1] = 0; i[1] < dims[1]; ++i[1])
      for (i[2] = 0; i[2] < dims[2]; ++i[2])
        for (i[3] = 0; i[3] < dims[3]; ++i[3]) f(i);
}

}  // namespace

int64_t CudnnGraphInterpreter::offset(int64_t uid, const int64_t index[4]) const {
  const CudnnTensorInfo& t = graph_.tensor_info(uid);
  Dims4 d = dims4(t);
  if (dense_.count(uid) != 0)  // an intermediate: row-major, whatever strides it was declared with
    for (int i = 3, stride = 1; i >= 0; stride *= static_cast<int>(d.dims[i]), --i) d.strides[i] = stride;
  int64_t at = t.ragged >= 0 ? static_cast<int64_t>(memory_.at(t.ragged)[static_cast<size_t>(index[0])])
                             : index[0] * d.strides[0];
  for (int i = 1; i < 4; ++i) at += index[i] * d.strides[i];
  return at;
}

bool CudnnGraphInterpreter::outside(int64_t uid, const int64_t index[4]) const {
  const CudnnTensorInfo& t = graph_.tensor_info(uid);
  if (t.ragged < 0) return false;
  const std::vector<float>& offsets = memory_.at(t.ragged);
  const auto b = static_cast<size_t>(index[0]);
  const int64_t row = dims4(t).strides[2];
  return index[2] >= static_cast<int64_t>(offsets[b + 1] - offsets[b]) / row;
}

float CudnnGraphInterpreter::read(int64_t uid, const int64_t out_index[4], const std::vector<int64_t>& out_dims) const {
  const Dims4 d = dims4(graph_.tensor_info(uid));
  int64_t index[4];
  for (int i = 0; i < 4; ++i) index[i] = broadcast(out_index[i], out_dims[static_cast<size_t>(i)], d.dims[i]);
  if (outside(uid, index)) return 0.f;
  const std::vector<float>& m = memory_.at(uid);
  const int64_t at = offset(uid, index);
  MT_ASSERT(at >= 0 && at < static_cast<int64_t>(m.size()), "tensor {} read at {} of {}", uid, at, m.size());
  return m[static_cast<size_t>(at)];
}

void CudnnGraphInterpreter::ensure(int64_t uid) {
  if (memory_.count(uid) != 0) return;
  const Dims4 d = dims4(graph_.tensor_info(uid));
  dense_.insert(uid);
  memory_[uid].assign(static_cast<size_t>(d.dims[0] * d.dims[1] * d.dims[2] * d.dims[3]), 0.f);
}

void CudnnGraphInterpreter::write(int64_t uid, const int64_t index[4], float value) {
  if (outside(uid, index)) return;
  std::vector<float>& m = memory_.at(uid);
  const int64_t at = offset(uid, index);
  MT_ASSERT(at >= 0 && at < static_cast<int64_t>(m.size()), "tensor {} written at {} of {}", uid, at, m.size());
  m[static_cast<size_t>(at)] = graph_.tensor_info(uid).type == CUDNN_DATA_BFLOAT16 ? mt::round_to_bf16(value) : value;
}

void CudnnGraphInterpreter::run() {
  for (const mt::cuda::CudnnScalar& s : graph_.scalars()) memory_[s.uid] = {*static_cast<const float*>(s.value)};
  for (const CudnnOpRecord& op : graph_.operations()) {
    switch (op.kind) {
      case CudnnOpRecord::pointwise:
      case CudnnOpRecord::pointwise_backward:
        pointwise(op);
        break;
      case CudnnOpRecord::matmul:
        matmul(op);
        break;
      case CudnnOpRecord::reduction:
        reduction(op);
        break;
      case CudnnOpRecord::reshape:
        reshape(op);
        break;
    }
  }
}

void CudnnGraphInterpreter::pointwise(const CudnnOpRecord& op) {
  ensure(op.out);
  const Dims4 y = dims4(graph_.tensor_info(op.out));
  const std::vector<int64_t> out_dims(y.dims, y.dims + 4);
  for_each_index(y.dims, [&](const int64_t* i) {
    float in[3];
    for (size_t k = 0; k < 3; ++k) in[k] = k < op.in.size() && op.in[k] >= 0 ? read(op.in[k], i, out_dims) : 0.f;
    write(op.out, i,
          op.kind == CudnnOpRecord::pointwise_backward ? tanh_backward(op, in[0], in[1])
                                                       : pointwise_value(op, in[0], in[1], in[2], i));
  });
}

void CudnnGraphInterpreter::matmul(const CudnnOpRecord& op) {
  ensure(op.out);
  const int64_t a = op.in[0], b = op.in[1], m_override = op.in[2], n_override = op.in[3], k_override = op.in[4];
  const Dims4 c = dims4(graph_.tensor_info(op.out)), ad = dims4(graph_.tensor_info(a)),
              bd = dims4(graph_.tensor_info(b));
  const int64_t K = ad.dims[3];
  MT_ASSERT(bd.dims[2] == K, "matmul inner dims {} and {}", K, bd.dims[2]);
  auto count = [&](int64_t uid, int64_t batch, int64_t whole) {
    if (uid < 0) return whole;
    const int64_t index[4] = {batch, 0, 0, 0};
    return std::min(whole, static_cast<int64_t>(memory_.at(uid)[static_cast<size_t>(offset(uid, index))]));
  };
  for_each_index(c.dims, [&](const int64_t* i) {
    if (i[2] >= count(m_override, i[0], c.dims[2]) || i[3] >= count(n_override, i[0], c.dims[3])) return;  // unwritten
    double sum = 0;
    for (int64_t k = 0, inner = count(k_override, i[0], K); k < inner; ++k) {
      const int64_t ai[4] = {broadcast(i[0], c.dims[0], ad.dims[0]), broadcast(i[1], c.dims[1], ad.dims[1]), i[2], k};
      const int64_t bi[4] = {broadcast(i[0], c.dims[0], bd.dims[0]), broadcast(i[1], c.dims[1], bd.dims[1]), k, i[3]};
      if (outside(a, ai) || outside(b, bi)) continue;
      sum += static_cast<double>(memory_.at(a)[static_cast<size_t>(offset(a, ai))]) *
             memory_.at(b)[static_cast<size_t>(offset(b, bi))];
    }
    write(op.out, i, static_cast<float>(sum));
  });
}

void CudnnGraphInterpreter::reduction(const CudnnOpRecord& op) {
  ensure(op.out);
  const int64_t x = op.in[0];
  const Dims4 xd = dims4(graph_.tensor_info(x)), yd = dims4(graph_.tensor_info(op.out));
  const bool max = op.mode == CUDNN_REDUCE_TENSOR_MAX;
  MT_ASSERT(max || op.mode == CUDNN_REDUCE_TENSOR_ADD, "reduction mode {} is not interpreted", op.mode);
  std::map<int64_t, double> acc;  // by the output's offset
  for_each_index(xd.dims, [&](const int64_t* i) {
    int64_t yi[4];
    for (int k = 0; k < 4; ++k) yi[k] = broadcast(i[k], xd.dims[k], yd.dims[k]);
    if (outside(op.out, yi)) return;  // a ragged row past its sequence: its offset is another's
    const double v = memory_.at(x)[static_cast<size_t>(offset(x, i))];
    const auto [it, first] = acc.emplace(offset(op.out, yi), v);
    if (!first) it->second = max ? std::max(it->second, v) : it->second + v;
  });
  for_each_index(yd.dims, [&](const int64_t* i) {
    if (!outside(op.out, i)) write(op.out, i, static_cast<float>(acc.at(offset(op.out, i))));
  });
}

void CudnnGraphInterpreter::reshape(const CudnnOpRecord& op) {
  const int64_t x = op.in[0];
  if (dense_.count(x) != 0) {  // its memory is row-major: a view of it needs it declared so
    const Dims4 d = dims4(graph_.tensor_info(x));
    for (int i = 3, stride = 1; i >= 0; stride *= static_cast<int>(d.dims[i]), --i)
      MT_ASSERT(d.strides[i] == stride, "reshape of tensor {}: not declared row-major", x);
  }
  std::vector<float> view = memory_.at(x);  // the same memory, addressed by the output's strides
  if (graph_.tensor_info(op.out).type == CUDNN_DATA_BFLOAT16)
    for (float& v : view) v = mt::round_to_bf16(v);
  memory_[op.out] = std::move(view);
}

}  // namespace mt::test
#endif  // MEGATRAIN_HAVE_CUDNN
