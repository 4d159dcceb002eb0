// Grouped expert GEMMs (see grouped_gemm.h): row-major problems turned column-major as Gemm does (C = A·Bᵀ row-major
// is Cᶜ = op(B)·Aᶜ column-major).
#include "kernels/runtime/grouped_gemm.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/ops/cuda_check.h"
#include "kernels/runtime/cutlass_grouped_gemm.h"
#include "core/error.h"
#include "plan/gemm_workspace.h"

#define MT_CHECK_CUBLAS_V2(call) \
  MT_CHECK_CALL(throw_error, "cuBLAS", call, mt_rc_ == CUBLAS_STATUS_SUCCESS, cublasGetStatusString(mt_rc_))

namespace mt::cuda {
namespace {

cudaDataType_t data_type(DType t) { return t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }
int64_t element_size(DType t) { return static_cast<int64_t>(dtype_size(t)); }
const char* at(const void* p, int64_t elements, DType t) { return static_cast<const char*>(p) + elements * element_size(t); }

// The experts of offsets that have rows: (expert, first row, rows).
struct ExpertRows {
  int64_t e, r0, rows;
};
std::vector<ExpertRows> experts_with_rows(const int64_t* offsets, int64_t E) {
  std::vector<ExpertRows> out;
  for (int64_t e = 0; e < E; ++e)
    if (offsets[e + 1] > offsets[e]) out.push_back({e, offsets[e], offsets[e + 1] - offsets[e]});
  return out;
}

}  // namespace

GroupedGemm::GroupedGemm(cudaStream_t stream, MoeGemmChoice mode, int lanes)
    : stream_(stream), lane_count_(lanes), mode_(mode) {
  if (mode_ == MoeGemmChoice::cutlass) cutlass_device_ = CutlassGroupedGemm::unsupported_device();
  if (mode_ != MoeGemmChoice::grouped) return;
  MT_CHECK_CUBLAS_V2(cublasCreate(&handle_));
  MT_CHECK_CUBLAS_V2(cublasSetStream(handle_, stream_));
}

GroupedGemm::~GroupedGemm() {
  for (Lane& lane : lanes_) {
    cudaStreamSynchronize(lane.stream);
    lane.gemm.reset();
    cudaEventDestroy(lane.done);
    cudaStreamDestroy(lane.stream);
  }
  cutlass_.reset();
  if (fork_) cudaEventDestroy(fork_);
  if (device_pointers_) cudaFree(device_pointers_);
  if (handle_) cublasDestroy(handle_);
}

template <typename F>
void GroupedGemm::on_lanes(int64_t count, F f) {
  if (count == 0) return;
  if (lanes_.empty()) {
    MT_CHECK_CUDA(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    lanes_.resize(static_cast<size_t>(kExpertGemmStreams));  // all of them: the plan counts their workspaces
    for (Lane& lane : lanes_) {
      MT_CHECK_CUDA(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking));
      MT_CHECK_CUDA(cudaEventCreateWithFlags(&lane.done, cudaEventDisableTiming));
      lane.gemm = std::make_unique<Gemm>(lane.stream, kExpertGemmWorkspaceBytes);
    }
  }
  const int64_t used = std::min<int64_t>(lane_count_, count);
  MT_CHECK_CUDA(cudaEventRecord(fork_, stream_));
  for (int64_t l = 0; l < used; ++l) MT_CHECK_CUDA(cudaStreamWaitEvent(lanes_[static_cast<size_t>(l)].stream, fork_));
  for (int64_t i = 0; i < count; ++i) f(*lanes_[static_cast<size_t>(i % used)].gemm, i);
  for (int64_t l = 0; l < used; ++l) {
    Lane& lane = lanes_[static_cast<size_t>(l)];
    MT_CHECK_CUDA(cudaEventRecord(lane.done, lane.stream));
    MT_CHECK_CUDA(cudaStreamWaitEvent(stream_, lane.done));
  }
}

void GroupedGemm::grouped(const std::vector<Problem>& problems, bool trans_a, bool trans_b, DType ab, DType c,
                          float beta) {
  const auto n = static_cast<int64_t>(problems.size());
  if (n == 0) return;
  if (3 * n > pointer_capacity_) {
    if (device_pointers_) MT_CHECK_CUDA(cudaFree(device_pointers_));
    MT_CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&device_pointers_), static_cast<size_t>(3 * n) * sizeof(void*)));
    pointer_capacity_ = 3 * n;
  }
  std::vector<const void*> pointers(static_cast<size_t>(3 * n));
  std::vector<int> m(n), nn(n), k(n), lda(n), ldb(n), ldc(n), size(n, 1);
  std::vector<cublasOperation_t> ta(n, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N), tb(n, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  std::vector<float> alpha(n, 1.0f), betas(n, beta);
  for (int64_t i = 0; i < n; ++i) {
    const Problem& p = problems[static_cast<size_t>(i)];
    pointers[static_cast<size_t>(i)] = p.a;
    pointers[static_cast<size_t>(n + i)] = p.b;
    pointers[static_cast<size_t>(2 * n + i)] = p.c;
    m[i] = p.m, nn[i] = p.n, k[i] = p.k, lda[i] = p.lda, ldb[i] = p.ldb, ldc[i] = p.ldc;
  }
  // Pageable source: the copy has read it when cudaMemcpyAsync returns.
  MT_CHECK_CUDA(cudaMemcpyAsync(device_pointers_, pointers.data(), pointers.size() * sizeof(void*),
                                cudaMemcpyHostToDevice, stream_));
  const void* const* A = const_cast<const void* const*>(device_pointers_);
  const void* const* B = const_cast<const void* const*>(device_pointers_ + n);
  void* const* C = device_pointers_ + 2 * n;
  MT_CHECK_CUBLAS_V2(cublasGemmGroupedBatchedEx(handle_, ta.data(), tb.data(), m.data(), nn.data(), k.data(),
                                                alpha.data(), A, data_type(ab), lda.data(), B, data_type(ab),
                                                ldb.data(), betas.data(), C, data_type(c), ldc.data(),
                                                static_cast<int>(n), size.data(), CUBLAS_COMPUTE_32F));
}

bool GroupedGemm::through_cutlass(ExpertGemm g, DType t, const void* out, const void* a, const void* b,
                                  int64_t w_stride, const int64_t* offsets, int64_t E, int64_t I, int64_t O,
                                  float beta) {
  if (mode_ != MoeGemmChoice::cutlass || t != DType::bf16) return false;
  std::string why = cutlass_device_;
  if (why.empty()) {
    const auto address = [](const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); };
    const ExpertGemmProblems p =
        expert_gemm_problems(g, address(out), address(a), address(b), w_stride, offsets, E, I, O);
    why = p.unsupported;
    if (why.empty()) {
      if (!cutlass_) cutlass_ = std::make_unique<CutlassGroupedGemm>(stream_);
      why = cutlass_->run(g, p.problems, beta);
      if (why.empty()) return true;
    }
  }
  bool& logged = fallback_logged_[static_cast<int>(g)];
  if (!logged) log_expert_gemm_fallback(g, why);
  logged = true;
  return false;
}

void GroupedGemm::forward(void* y, const void* x, const void* w, int64_t w_stride, const int64_t* offsets, int64_t E,
                          int64_t I, int64_t O, DType t) {
  if (through_cutlass(ExpertGemm::forward, t, y, x, w, w_stride, offsets, E, I, O, 0.0f)) return;
  const std::vector<ExpertRows> ex = experts_with_rows(offsets, E);
  const auto y_of = [&](const ExpertRows& r) { return const_cast<char*>(at(y, r.r0 * O, t)); };
  if (!grouped_call(t)) {
    on_lanes(static_cast<int64_t>(ex.size()), [&](Gemm& g, int64_t i) {
      const ExpertRows& r = ex[static_cast<size_t>(i)];
      g.run(y_of(r), t, at(x, r.r0 * I, t), at(w, r.e * w_stride, t), t, true, r.rows, O, I, 1.0f, 0.0f, true);
    });
    return;
  }
  std::vector<Problem> problems;
  for (const ExpertRows& r : ex)  // Cᶜ[O, rows] = wᶜᵀ · xᶜ
    problems.push_back({at(w, r.e * w_stride, t), at(x, r.r0 * I, t), y_of(r), static_cast<int>(O),
                        static_cast<int>(r.rows), static_cast<int>(I), static_cast<int>(I), static_cast<int>(I),
                        static_cast<int>(O)});
  grouped(problems, true, false, t, t, 0.0f);
}

void GroupedGemm::backward_data(void* dx, const void* dy, const void* w, int64_t w_stride, const int64_t* offsets,
                                int64_t E, int64_t I, int64_t O, DType t, float beta) {
  if (through_cutlass(ExpertGemm::backward_data, t, dx, dy, w, w_stride, offsets, E, I, O, beta)) return;
  const std::vector<ExpertRows> ex = experts_with_rows(offsets, E);
  const auto dx_of = [&](const ExpertRows& r) { return const_cast<char*>(at(dx, r.r0 * I, t)); };
  if (!grouped_call(t)) {
    on_lanes(static_cast<int64_t>(ex.size()), [&](Gemm& g, int64_t i) {
      const ExpertRows& r = ex[static_cast<size_t>(i)];
      g.run(dx_of(r), t, at(dy, r.r0 * O, t), at(w, r.e * w_stride, t), t, false, r.rows, I, O, 1.0f, beta, true);
    });
    return;
  }
  std::vector<Problem> problems;
  for (const ExpertRows& r : ex)  // Cᶜ[I, rows] = wᶜ[I, O] · dyᶜ[O, rows]
    problems.push_back({at(w, r.e * w_stride, t), at(dy, r.r0 * O, t), dx_of(r), static_cast<int>(I),
                        static_cast<int>(r.rows), static_cast<int>(O), static_cast<int>(I), static_cast<int>(O),
                        static_cast<int>(I)});
  grouped(problems, false, false, t, t, beta);
}

void GroupedGemm::backward_weight(float* dw, const void* dy, const void* x, int64_t w_stride, const int64_t* offsets,
                                  int64_t E, int64_t I, int64_t O, DType t) {
  if (through_cutlass(ExpertGemm::backward_weight, t, dw, dy, x, w_stride, offsets, E, I, O, 1.0f)) return;
  const std::vector<ExpertRows> ex = experts_with_rows(offsets, E);
  if (!grouped_call(t)) {
    on_lanes(static_cast<int64_t>(ex.size()), [&](Gemm& g, int64_t i) {
      const ExpertRows& r = ex[static_cast<size_t>(i)];
      g.run_at_b(dw + r.e * w_stride, at(dy, r.r0 * O, t), at(x, r.r0 * I, t), t, O, I, r.rows, 1.0f, 1.0f, true);
    });
    return;
  }
  std::vector<Problem> problems;
  for (const ExpertRows& r : ex)  // Cᶜ[I, O] = xᶜ[I, rows] · dyᶜ[O, rows]ᵀ
    problems.push_back({at(x, r.r0 * I, t), at(dy, r.r0 * O, t), dw + r.e * w_stride, static_cast<int>(I),
                        static_cast<int>(O), static_cast<int>(r.rows), static_cast<int>(I), static_cast<int>(O),
                        static_cast<int>(I)});
  grouped(problems, false, true, t, DType::f32, 1.0f);
}

}  // namespace mt::cuda
