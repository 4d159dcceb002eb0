// CUTLASS's Hopper grouped GEMM for the experts' bf16 GEMMs (see cutlass_grouped_gemm.h): the three kernel types,
// built with CUTLASS's collective builders, and their launch from a slot of packed problem arrays.
#include "kernels/runtime/cutlass_grouped_gemm.h"

#include <algorithm>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include "core/error.h"
#include "kernels/ops/cuda_check.h"
#include "kernels/ops/launch_check.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "cutlass_grouped_gemm.cu is built for sm_90a only (TMA and wgmma): CMakeLists.txt gives its library 90a"
#endif

namespace mt::cuda {
namespace {

using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;  // (m, n, k) per expert
using bf16 = cutlass::bfloat16_t;

// One grouped kernel: bf16 A and B in the given layouts (CUTLASS's tags: A [m, k] RowMajor is K-major, ColumnMajor
// M-major; B [k, n] ColumnMajor is K-major, RowMajor N-major), D (= C) of ElementD row-major, D = A·B + beta·C with
// fp32 accumulation and scalars, the cooperative warp-specialized schedule, one CTA a cluster (experts' row counts
// differ, so no multicast across a cluster's CTAs).
template <class LayoutA, class LayoutB, class ElementD_, class TileShape>
struct GroupedKernel {
  using ElementD = ElementD_;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  static constexpr int kAlignmentAB = 16 / sizeof(bf16);  // elements in 16 bytes: TMA's alignment
  static constexpr int kAlignmentD = 16 / sizeof(ElementD);
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementD, cutlass::layout::RowMajor*, kAlignmentD,
      ElementD, cutlass::layout::RowMajor*, kAlignmentD, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
      cutlass::epilogue::fusion::LinearCombination<ElementD, float, ElementD, float>>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, bf16, LayoutA*, kAlignmentAB, bf16, LayoutB*, kAlignmentAB,
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<
      cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>>;
};

using RowMajor = cutlass::layout::RowMajor;
using ColumnMajor = cutlass::layout::ColumnMajor;
using Tile128x256 = cute::Shape<cute::_128, cute::_256, cute::_64>;
using Tile128x128 = cute::Shape<cute::_128, cute::_128, cute::_64>;
// forward: A = x [rows, I] K-major, B = w_e [O, I] K-major; backward data: A = dy K-major, B = w_e [O, I] as [k, n]
// N-major; backward weight: A = dyᵀ M-major, B = x N-major, D = dw_e fp32.
using ForwardKernel = GroupedKernel<RowMajor, ColumnMajor, bf16, Tile128x256>;
using BackwardDataKernel = GroupedKernel<RowMajor, RowMajor, bf16, Tile128x256>;
using BackwardWeightKernel = GroupedKernel<ColumnMajor, RowMajor, float, Tile128x128>;

const char* status_text(cutlass::Status s) { return cutlassGetStatusString(s); }

}  // namespace

CutlassGroupedGemm::CutlassGroupedGemm(cudaStream_t stream) : stream_(stream) {
  MT_CHECK_CUDA(cudaGetDevice(&device_));
  MT_CHECK_CUDA(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
  for (Slot& slot : slots_) MT_CHECK_CUDA(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
}

CutlassGroupedGemm::~CutlassGroupedGemm() {
  cudaStreamSynchronize(stream_);
  for (Slot& slot : slots_) {
    if (slot.host) cudaFreeHost(slot.host);
    if (slot.device) cudaFree(slot.device);
    cudaEventDestroy(slot.copied);
  }
  if (workspace_) cudaFree(workspace_);
}

std::string CutlassGroupedGemm::unsupported_device() {
  int device = 0, major = 0, minor = 0;
  MT_CHECK_CUDA(cudaGetDevice(&device));
  MT_CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  MT_CHECK_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major == 9 && minor == 0) return "";
  return MT_FORMAT("the GPU is compute capability {}.{}, CUTLASS's kernels are built for sm_90a (H100, H200)", major,
                   minor);
}

CutlassGroupedGemm::Slot& CutlassGroupedGemm::next_slot(int64_t bytes) {
  Slot& slot = slots_[next_];
  next_ = (next_ + 1) % slots_.size();
  MT_CHECK_CUDA(cudaEventSynchronize(slot.copied));  // the copy that last read the host bytes has finished
  if (slot.bytes < bytes) {
    MT_CHECK_CUDA(cudaStreamSynchronize(stream_));  // a launch may still read the old device arrays
    if (slot.host) MT_CHECK_CUDA(cudaFreeHost(slot.host));
    if (slot.device) MT_CHECK_CUDA(cudaFree(slot.device));
    MT_CHECK_CUDA(cudaMallocHost(reinterpret_cast<void**>(&slot.host), static_cast<size_t>(bytes)));
    MT_CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&slot.device), static_cast<size_t>(bytes)));
    slot.bytes = bytes;
  }
  return slot;
}

void* CutlassGroupedGemm::workspace(int64_t bytes) {
  if (bytes > workspace_bytes_) {
    MT_CHECK_CUDA(cudaStreamSynchronize(stream_));
    if (workspace_) MT_CHECK_CUDA(cudaFree(workspace_));
    workspace_bytes_ = std::max(bytes, kCutlassGemmWorkspaceBytes);
    MT_CHECK_CUDA(cudaMalloc(&workspace_, static_cast<size_t>(workspace_bytes_)));
  }
  return workspace_;
}

template <class Kernel>
std::string CutlassGroupedGemm::launch(ExpertGemm g, const std::vector<ExpertGemmProblem>& problems, float beta) {
  using Gemm = typename Kernel::Gemm;
  using GemmKernel = typename Gemm::GemmKernel;
  using ElementD = typename Kernel::ElementD;
  using Shape = typename ProblemShape::UnderlyingProblemShape;
  // The packed arrays (backend/expert_gemm_problems.h) are these types' bytes: (m, n, k) as three int32, and each
  // stride as its one dynamic mode, the leading dimension, in int64.
  static_assert(sizeof(Shape) == 3 * sizeof(int32_t));
  static_assert(sizeof(typename GemmKernel::InternalStrideA) == sizeof(int64_t) &&
                sizeof(typename GemmKernel::InternalStrideB) == sizeof(int64_t) &&
                sizeof(typename GemmKernel::InternalStrideC) == sizeof(int64_t) &&
                sizeof(typename GemmKernel::InternalStrideD) == sizeof(int64_t));
  const auto n = static_cast<int64_t>(problems.size());
  const ExpertGemmArrays s = expert_gemm_arrays(n);
  Slot& slot = next_slot(s.bytes);
  pack_expert_gemm_arrays(problems, slot.host);
  const auto device = [&](int64_t offset) { return static_cast<void*>(slot.device + offset); };
  typename Gemm::Arguments args;
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  args.problem_shape = {static_cast<int>(n), static_cast<Shape*>(device(s.shapes)),
                        reinterpret_cast<const Shape*>(slot.host + s.shapes)};
  args.mainloop.ptr_A = static_cast<const bf16**>(device(s.a));
  args.mainloop.dA = static_cast<typename GemmKernel::InternalStrideA*>(device(s.lda));
  args.mainloop.ptr_B = static_cast<const bf16**>(device(s.b));
  args.mainloop.dB = static_cast<typename GemmKernel::InternalStrideB*>(device(s.ldb));
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = beta;
  args.epilogue.ptr_C = static_cast<const ElementD**>(device(s.c));
  args.epilogue.dC = static_cast<typename GemmKernel::InternalStrideC*>(device(s.ldc));
  args.epilogue.ptr_D = static_cast<ElementD**>(device(s.d));
  args.epilogue.dD = static_cast<typename GemmKernel::InternalStrideD*>(device(s.ldd));
  args.hw_info.device_id = device_;
  args.hw_info.sm_count = sm_count_;
  const cutlass::Status can = Gemm::can_implement(args);  // reads the host shapes only
  if (can != cutlass::Status::kSuccess) return MT_FORMAT("CUTLASS refused the problems: {}", status_text(can));
  MT_CHECK_CUDA(cudaMemcpyAsync(slot.device, slot.host, static_cast<size_t>(s.bytes), cudaMemcpyHostToDevice, stream_));
  MT_CHECK_CUDA(cudaEventRecord(slot.copied, stream_));
  void* ws = workspace(static_cast<int64_t>(Gemm::get_workspace_size(args)));
  Gemm gemm;
  const cutlass::Status init = gemm.initialize(args, ws, stream_);
  MT_REQUIRE(init == cutlass::Status::kSuccess, "CUTLASS grouped GEMM ({}, {} experts): initialize: {}",
             expert_gemm_name(g), n, status_text(init));
  const cutlass::Status ran = gemm.run(stream_);
  MT_REQUIRE(ran == cutlass::Status::kSuccess, "CUTLASS grouped GEMM ({}, {} experts): run: {}", expert_gemm_name(g), n,
             status_text(ran));
  MT_CHECK_LAUNCH("cutlass_grouped_gemm", "{}, {} experts", expert_gemm_name(g), n);
  return "";
}

std::string CutlassGroupedGemm::run(ExpertGemm g, const std::vector<ExpertGemmProblem>& problems, float beta) {
  if (problems.empty()) return "";
  switch (g) {
    case ExpertGemm::forward: return launch<ForwardKernel>(g, problems, 0.0f);
    case ExpertGemm::backward_data: return launch<BackwardDataKernel>(g, problems, beta);
    case ExpertGemm::backward_weight: return launch<BackwardWeightKernel>(g, problems, 1.0f);
  }
  return "";
}

}  // namespace mt::cuda
