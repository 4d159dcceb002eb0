// A host interpreter of a built cuDNN operation graph (CudnnGraphBuilder's operations() and tensor_info()), so that
// the SDPA graphs' meaning can be checked against the CPU reference without a GPU. Every tensor is a flat buffer of
// floats: a bound one addressed by its strides (a ragged one's batch entry b at its offsets' b-th value, its rows
// past the next entry's offset read as 0 and not written), an
// intermediate row-major (cuDNN keeps those where it likes); int32 and boolean values
// are held as floats; a bf16 tensor's values are rounded to bf16 where they are written; a reshape is a view of its
// input's memory; a matmul, pointwise operation or reduction broadcasts a dimension of 1, or maps a dimension that
// divides the output's onto consecutive groups of it (GQA's heads), and a matmul's M, N and K overrides limit each
// batch entry's rows, columns and inner sum (what they leave is not written). Invariant: operations run in the order
// they were added, each reading only tensors bound or written before it.
#pragma once
#ifdef MEGATRAIN_HAVE_CUDNN
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "kernels/attention/cudnn_graph_builder.h"

namespace mt::test {

class CudnnGraphInterpreter {
 public:
  explicit CudnnGraphInterpreter(const mt::cuda::CudnnGraphBuilder& graph) : graph_(graph) {}
  // A device tensor's memory (floats, as its strides address it).
  void bind(int64_t uid, std::vector<float> memory) { memory_[uid] = std::move(memory); }
  // Runs every operation; the graph's scalars are read from the builder.
  void run();
  const std::vector<float>& memory(int64_t uid) const { return memory_.at(uid); }

 private:
  int64_t offset(int64_t uid, const int64_t index[4]) const;  // where an element of a 4-d tensor lies
  bool outside(int64_t uid, const int64_t index[4]) const;    // a ragged tensor's row past its sequence
  float read(int64_t uid, const int64_t out_index[4], const std::vector<int64_t>& out_dims) const;
  void write(int64_t uid, const int64_t index[4], float value);
  void ensure(int64_t uid);  // a virtual tensor's memory, zeroed, on first write
  void pointwise(const mt::cuda::CudnnOpRecord& op);
  void matmul(const mt::cuda::CudnnOpRecord& op);
  void reduction(const mt::cuda::CudnnOpRecord& op);
  void reshape(const mt::cuda::CudnnOpRecord& op);

  const mt::cuda::CudnnGraphBuilder& graph_;
  std::map<int64_t, std::vector<float>> memory_;
  std::set<int64_t> dense_;  // intermediates, held row-major
};

}  // namespace mt::test
#endif  // MEGATRAIN_HAVE_CUDNN
