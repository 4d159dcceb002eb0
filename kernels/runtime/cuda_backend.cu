// mt::Backend on CUDA (see cuda_backend.h): dispatch by dtype to the kernels/ launchers, linear layers and
// the chunked LM head through cuBLASLt.
#include "kernels/runtime/cuda_backend.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <string>
#include <unordered_map>

#include "kernels/ops/cuda_check.h"
#include "core/error.h"
#include "core/runtime_switches.h"
#ifdef MEGATRAIN_HAVE_CUDNN
#include "kernels/attention/cudnn_attention.h"
#endif
#include "kernels/runtime/gemm.h"
#include "kernels/runtime/grouped_gemm.h"
#include "kernels/runtime/op_profile.h"
#include "kernels/runtime/rate_probe.h"
#include "backend/gated_delta_rule_scratch.h"
#include "backend/head_chunk.h"
#include "kernels/ops/kernels.h"
#include "plan/cudnn_attention_plan.h"
#include "plan/gemm_workspace.h"

namespace mt {
namespace {

using bf16 = __nv_bfloat16;

class CudaBackend final : public Backend {
 public:
  CudaBackend(DType dtype, int device, const RuntimeSwitches& switches)
      : dtype_(dtype), device_(device), switches_(switches), profile_(switches.profile_ops) {
    MT_CHECK_CUDA(cudaSetDevice(device_));
    MT_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // The kernels' stream-ordered scratch (launch_check.h) keeps its pages between calls: with the default release
    // threshold of 0 every synchronisation returns them and the next call maps them again (gigabytes per Gated
    // DeltaNet layer). The plan already counts that scratch inside the layer workspace.
    cudaMemPool_t pool = nullptr;
    MT_CHECK_CUDA(cudaDeviceGetDefaultMemPool(&pool, device_));
    uint64_t keep = UINT64_MAX;
    MT_CHECK_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    gemm_ = std::make_unique<cuda::Gemm>(stream_, kGemmWorkspaceBytes);
    grouped_ = std::make_unique<cuda::GroupedGemm>(stream_, switches_.moe_gemm, switches_.moe_gemm_streams);
    MT_CHECK_CUDA(cudaMalloc(&scalar_, sizeof(double)));
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
#ifdef MEGATRAIN_HAVE_CUDNN
    cudnn_.reset();
#endif
    grouped_.reset();
    gemm_.reset();
    cudaFree(scalar_);
    if (landing_) cudaFreeHost(landing_);
    cudaFree(row_loss_);
    cudaFree(logits_);
    cudaFree(dlogits_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  DType dtype() const override { return dtype_; }
  bool host_memory() const override { return false; }
  cudaStream_t stream() const { return stream_; }
  std::string device_name() const override {
    cudaDeviceProp prop{};
    MT_CHECK_CUDA(cudaGetDeviceProperties(&prop, device_));
    return prop.name;
  }
  std::optional<DeviceRates> measure_rates() override { return cuda::measure_device_rates(stream_, *gemm_); }

  int64_t peak_memory_bytes() const override { return peak_; }
  int64_t device_memory_bytes() const override {
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    return static_cast<int64_t>(total);
  }

  void* alloc_bytes(int64_t bytes) override {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1)));
    if (err != cudaSuccess) {
      size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      throw Error(MT_FORMAT("GPU memory: cannot allocate {:.2f} GiB ({:.2f} GiB free of {:.2f} GiB): {}",
                              bytes / 1073741824.0, free / 1073741824.0, total / 1073741824.0,
                              cudaGetErrorString(err)));
    }
    sizes_[p] = bytes;
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return p;
  }
  void free_bytes(void* p) override {
    if (!p) return;
    MT_CHECK_CUDA(cudaFree(p));
    in_use_ -= sizes_[p];
    sizes_.erase(p);
  }
  void upload(void* dst, const void* src, int64_t bytes) override {
    MT_CHECK_CUDA(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_));
  }
  // A small download (an MoE layer's expert offsets, a loss) lands through mapped page-locked memory written by a
  // kernel: a copy engine's queue holds the gradient stream's bulk transfers, and a few bytes behind them waited
  // milliseconds per MoE layer and micro-batch.
  void download(void* dst, const void* src, int64_t bytes) override {
    if (bytes <= kLandingBytes) {
      if (landing_ == nullptr) {
        MT_CHECK_CUDA(cudaHostAlloc(&landing_, kLandingBytes, cudaHostAllocMapped));
        MT_CHECK_CUDA(cudaHostGetDevicePointer(&landing_device_, landing_, 0));
      }
      cuda::store_to_host(landing_device_, src, bytes, stream_);
      MT_CHECK_CUDA(cudaStreamSynchronize(stream_));
      std::memcpy(dst, landing_, static_cast<size_t>(bytes));
      return;
    }
    MT_CHECK_CUDA(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_));
    MT_CHECK_CUDA(cudaStreamSynchronize(stream_));
  }
  void copy_bytes(void* dst, const void* src, int64_t bytes) override {
    MT_CHECK_CUDA(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream_));
  }
  void zero_bytes(void* p, int64_t bytes) override {
    MT_CHECK_CUDA(cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), stream_));
  }
  void synchronize() override {
    MT_CHECK_CUDA(cudaStreamSynchronize(stream_));
    if (profile_.enabled()) profile_.fold();
  }
  std::string op_profile() override { return profile_.report(); }

  void linear_forward(void* y, const void* x, const void* w, const void* b, int64_t T, int64_t I,
                      int64_t O) override {
    const cuda::OpProfile::Span span(profile_, "linear_forward", stream_);
    gemm_->run(y, dtype_, x, w, dtype_, true, T, O, I, 1.0f, 0.0f);
    if (b) dispatch([&](auto* t) { cuda::bias_forward(cast(t, y), cast(t, b), T, O, stream_); });
  }
  void linear_forward_add(void* y, const void* x, const void* w, const void* b, const void* residual, int64_t T,
                          int64_t I, int64_t O, float scale) override {
    if (b) {  // the bias is a pass of its own, so the residual is one too: scale·(x·wᵀ + b) + residual, as the CPU's
      linear_forward(y, x, w, b, T, I, O);
      if (scale != 1.0f) this->scale(y, scale, T * O);
      add(y, residual, T * O);
      return;
    }
    const cuda::OpProfile::Span span(profile_, "linear_forward", stream_);
    gemm_->run_add(y, residual, x, w, dtype_, T, O, I, scale);
  }
  void linear_backward(void* dx, float* dw, float* db, const void* dy, const void* x, const void* w, int64_t T,
                       int64_t I, int64_t O, bool accumulate_dx, float dy_scale) override {
    const cuda::OpProfile::Span span(profile_, "linear_backward", stream_);
    if (dx) gemm_->run(dx, dtype_, dy, w, dtype_, false, T, I, O, dy_scale, accumulate_dx ? 1.0f : 0.0f);
    if (dw) gemm_->run_at_b(dw, dy, x, dtype_, O, I, T, dy_scale, 1.0f);
    if (db) dispatch([&](auto* t) { cuda::bias_backward(db, cast(t, dy), T, O, dy_scale, stream_); });
  }

  void embedding_forward(void* y, const void* table, const int32_t* ids, int64_t T, int64_t H) override {
    const cuda::OpProfile::Span span(profile_, "embedding_forward", stream_);
    dispatch([&](auto* t) { cuda::embedding_forward(cast(t, y), cast(t, table), ids, T, H, stream_); });
  }
  void embedding_backward(float* dtable, const void* dy, const int32_t* ids, int64_t T, int64_t H) override {
    const cuda::OpProfile::Span span(profile_, "embedding_backward", stream_);
    dispatch([&](auto* t) { cuda::embedding_backward(dtable, cast(t, dy), ids, T, H, stream_); });
  }
  void rmsnorm_forward(void* y, const void* x, const void* w, int64_t N, int64_t D, float eps,
                       float weight_offset) override {
    const cuda::OpProfile::Span span(profile_, "rmsnorm_forward", stream_);
    dispatch([&](auto* t) {
      cuda::rmsnorm_forward(cast(t, y), cast(t, x), cast(t, w), N, D, eps, weight_offset, stream_);
    });
  }
  void rmsnorm_forward_fp32_product(void* y, const void* x, const void* w, int64_t N, int64_t D,
                                    float eps) override {
    const cuda::OpProfile::Span span(profile_, "rmsnorm_forward", stream_);
    dispatch([&](auto* t) {
      cuda::rmsnorm_forward(cast(t, y), cast(t, x), cast(t, w), N, D, eps, 0.f, stream_, /*fp32_product=*/true);
    });
  }
  void rmsnorm_backward(void* dx, float* dw, const void* dy, const void* x, const void* w, int64_t N, int64_t D,
                        float eps, float weight_offset) override {  // the fused kernel without a residual
    rmsnorm_backward_add(dx, dw, dy, x, w, nullptr, N, D, eps, weight_offset);
  }
  void rmsnorm_backward_add(void* dx, float* dw, const void* dy, const void* x, const void* w, const void* residual,
                            int64_t N, int64_t D, float eps, float weight_offset) override {
    const cuda::OpProfile::Span span(profile_, "rmsnorm_backward", stream_);
    dispatch([&](auto* t) {
      cuda::rmsnorm_backward(cast(t, dx), dw, cast(t, dy), cast(t, x), cast(t, w), cast(t, residual), N, D, eps,
                             weight_offset, stream_);
    });
  }
  void layernorm_forward(void* y, const void* x, const void* w, const void* b, int64_t N, int64_t D,
                         int64_t weight_rows, float eps) override {
    const cuda::OpProfile::Span span(profile_, "layernorm_forward", stream_);
    dispatch([&](auto* t) {
      cuda::layernorm_forward(cast(t, y), cast(t, x), cast(t, w), cast(t, b), N, D, weight_rows, eps, stream_);
    });
  }
  void layernorm_backward(void* dx, float* dw, float* db, const void* dy, const void* x, const void* w,
                          const void* residual, int64_t N, int64_t D, int64_t weight_rows, float eps) override {
    const cuda::OpProfile::Span span(profile_, "layernorm_backward", stream_);
    dispatch([&](auto* t) {
      cuda::layernorm_backward(cast(t, dx), dw, db, cast(t, dy), cast(t, x), cast(t, w), cast(t, residual), N, D,
                               weight_rows, eps, stream_);
    });
  }
  void rms_normalize_forward(void* y, const void* x, int64_t N, int64_t D, float eps) override {
    const cuda::OpProfile::Span span(profile_, "rms_normalize_forward", stream_);
    dispatch([&](auto* t) { cuda::rms_normalize_forward(cast(t, y), cast(t, x), N, D, eps, stream_); });
  }
  void rms_normalize_backward(void* dx, const void* dy, const void* x, int64_t N, int64_t D, float eps) override {
    const cuda::OpProfile::Span span(profile_, "rms_normalize_backward", stream_);
    dispatch([&](auto* t) { cuda::rms_normalize_backward(cast(t, dx), cast(t, dy), cast(t, x), N, D, eps, stream_); });
  }
  void attention_temperature(void* x, int64_t T, int64_t seq, int64_t width, float floor_scale,
                             float attn_scale) override {
    const cuda::OpProfile::Span span(profile_, "attention_temperature", stream_);
    dispatch([&](auto* t) { cuda::attention_temperature(cast(t, x), T, seq, width, floor_scale, attn_scale, stream_); });
  }
  void normalize_rows_forward(void* y, const void* x, int64_t N, int64_t D) override {
    const cuda::OpProfile::Span span(profile_, "normalize_rows_forward", stream_);
    dispatch([&](auto* t) { cuda::normalize_rows_forward(cast(t, y), cast(t, x), N, D, stream_); });
  }
  void normalize_rows_backward(float* dx, const float* dy, const void* x, int64_t N, int64_t D) override {
    const cuda::OpProfile::Span span(profile_, "normalize_rows_backward", stream_);
    dispatch([&](auto* t) { cuda::normalize_rows_backward(dx, dy, cast(t, x), N, D, stream_); });
  }
  void rope_forward(void* x, const float* cos, const float* sin, const int32_t* positions, int64_t T,
                    int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved) override {
    const cuda::OpProfile::Span span(profile_, "rope_forward", stream_);
    dispatch([&](auto* t) {
      cuda::rope_forward(cast(t, x), cos, sin, positions, T, n_heads, head_dim, rot_dim, interleaved, stream_);
    });
  }
  void rope_backward(void* dx, const float* cos, const float* sin, const int32_t* positions, int64_t T,
                     int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved) override {
    const cuda::OpProfile::Span span(profile_, "rope_backward", stream_);
    dispatch([&](auto* t) {
      cuda::rope_backward(cast(t, dx), cos, sin, positions, T, n_heads, head_dim, rot_dim, interleaved, stream_);
    });
  }
  void attention_forward(void* out, float* lse, const void* q, const void* k, const void* v,
                         const AttnShape& shape) override {
    const cuda::OpProfile::Span span(profile_, "attention_forward", stream_);
#ifdef MEGATRAIN_HAVE_CUDNN
    if (cuda::CudnnAttention* c = cudnn_for(shape, false)) {
      if (c->forward(static_cast<bf16*>(out), lse, static_cast<const bf16*>(q), static_cast<const bf16*>(k),
                     static_cast<const bf16*>(v), shape, attention_limit_))
        return;
    }
#endif
    dispatch([&](auto* t) {
      cuda::attention_forward(cast(t, out), lse, cast(t, q), cast(t, k), cast(t, v), shape, stream_);
    });
  }
  void attention_backward(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                          const void* v, const void* out, const float* lse, const AttnShape& shape) override {
    const cuda::OpProfile::Span span(profile_, "attention_backward", stream_);
#ifdef MEGATRAIN_HAVE_CUDNN
    if (cuda::CudnnAttention* c = cudnn_for(shape, true)) {
      if (c->backward(static_cast<bf16*>(dq), static_cast<bf16*>(dk), static_cast<bf16*>(dv),
                      static_cast<const bf16*>(dout), static_cast<const bf16*>(q), static_cast<const bf16*>(k),
                      static_cast<const bf16*>(v), static_cast<const bf16*>(out), lse, shape, attention_limit_))
        return;
    }
#endif
    dispatch([&](auto* t) {
      cuda::attention_backward(cast(t, dq), cast(t, dk), cast(t, dv), cast(t, dout), cast(t, q), cast(t, k),
                               cast(t, v), cast(t, out), lse, shape, stream_);
    });
  }
  void attention_sinks_backward(float* d_sinks, const void* dout, const void* out, const float* lse,
                                const AttnShape& shape) override {
    const cuda::OpProfile::Span span(profile_, "attention_sinks_backward", stream_);
    dispatch([&](auto* t) { cuda::attention_sinks_backward(d_sinks, cast(t, dout), cast(t, out), lse, shape, stream_); });
  }
  void clamped_swiglu_forward(void* y, const void* gate, const void* up, int64_t rows, int64_t cols, int64_t ld,
                              float alpha, float limit) override {
    const cuda::OpProfile::Span span(profile_, "clamped_swiglu_forward", stream_);
    dispatch([&](auto* t) {
      cuda::clamped_swiglu_forward(cast(t, y), cast(t, gate), cast(t, up), rows, cols, ld, alpha, limit, stream_);
    });
  }
  void clamped_swiglu_backward(void* dgate, void* dup, const void* dy, const void* gate, const void* up, int64_t rows,
                               int64_t cols, int64_t ld, float alpha, float limit) override {
    const cuda::OpProfile::Span span(profile_, "clamped_swiglu_backward", stream_);
    dispatch([&](auto* t) {
      cuda::clamped_swiglu_backward(cast(t, dgate), cast(t, dup), cast(t, dy), cast(t, gate), cast(t, up), rows, cols,
                                    ld, alpha, limit, stream_);
    });
  }
  void glu_forward(void* y, const void* gate, const void* up, int64_t rows, int64_t cols, int64_t ld,
                   Activation act) override {
    const cuda::OpProfile::Span span(profile_, "glu_forward", stream_);
    dispatch([&](auto* t) {
      cuda::glu_forward(cast(t, y), cast(t, gate), cast(t, up), rows, cols, ld, act, stream_);
    });
  }
  void glu_backward(void* dgate, void* dup, void* y, const void* dy, const void* gate, const void* up, int64_t rows,
                    int64_t cols, int64_t ld, Activation act) override {
    const cuda::OpProfile::Span span(profile_, "glu_backward", stream_);
    dispatch([&](auto* t) {
      cuda::glu_backward(cast(t, dgate), cast(t, dup), cast(t, y), cast(t, dy), cast(t, gate), cast(t, up), rows, cols,
                         ld, act, stream_);
    });
  }
  void head_concat_forward(void* y, const void* a, const void* b, int64_t T, int64_t H, int64_t a_dim, int64_t b_dim,
                           bool shared_b) override {
    const cuda::OpProfile::Span span(profile_, "head_concat_forward", stream_);
    dispatch([&](auto* t) {
      cuda::head_concat_forward(cast(t, y), cast(t, a), cast(t, b), T, H, a_dim, b_dim, shared_b, stream_);
    });
  }
  void head_concat_backward(void* da, void* db, const void* dy, int64_t T, int64_t H, int64_t a_dim, int64_t b_dim,
                            bool shared_b) override {
    const cuda::OpProfile::Span span(profile_, "head_concat_backward", stream_);
    dispatch([&](auto* t) {
      cuda::head_concat_backward(cast(t, da), cast(t, db), cast(t, dy), T, H, a_dim, b_dim, shared_b, stream_);
    });
  }
  void sigmoid_gate_forward(void* y, const void* x, const void* gate, int64_t n) override {
    const cuda::OpProfile::Span span(profile_, "sigmoid_gate_forward", stream_);
    dispatch([&](auto* t) { cuda::sigmoid_gate_forward(cast(t, y), cast(t, x), cast(t, gate), n, stream_); });
  }
  void sigmoid_gate_backward(void* dx, void* dgate, const void* dy, const void* x, const void* gate,
                             int64_t n) override {
    const cuda::OpProfile::Span span(profile_, "sigmoid_gate_backward", stream_);
    dispatch([&](auto* t) {
      cuda::sigmoid_gate_backward(cast(t, dx), cast(t, dgate), cast(t, dy), cast(t, x), cast(t, gate), n, stream_);
    });
  }
  void causal_conv1d_forward(void* y, const void* x, const void* w, int64_t batch, int64_t seq, int64_t C, int64_t K,
                             const int32_t* segments) override {
    const cuda::OpProfile::Span span(profile_, "causal_conv1d_forward", stream_);
    dispatch([&](auto* t) {
      cuda::causal_conv1d_forward(cast(t, y), cast(t, x), cast(t, w), batch, seq, C, K, segments, stream_);
    });
  }
  void causal_conv1d_backward(void* dx, float* dw, const void* dy, const void* x, const void* w, int64_t batch,
                              int64_t seq, int64_t C, int64_t K, const int32_t* segments) override {
    const cuda::OpProfile::Span span(profile_, "causal_conv1d_backward", stream_);
    dispatch([&](auto* t) {
      cuda::causal_conv1d_backward(cast(t, dx), dw, cast(t, dy), cast(t, x), cast(t, w), batch, seq, C, K, segments,
                                   stream_);
    });
  }
  void deltanet_gates_forward(float* g, float* beta, const void* ba, const void* a_log, const void* dt_bias,
                              int64_t T, int64_t n) override {
    const cuda::OpProfile::Span span(profile_, "deltanet_gates_forward", stream_);
    dispatch([&](auto* t) {
      cuda::deltanet_gates_forward(g, beta, cast(t, ba), cast(t, a_log), cast(t, dt_bias), T, n, stream_);
    });
  }
  void deltanet_gates_backward(void* d_ba, float* d_a_log, float* d_dt_bias, const float* dg, const float* dbeta,
                               const void* ba, const void* a_log, const void* dt_bias, int64_t T, int64_t n) override {
    const cuda::OpProfile::Span span(profile_, "deltanet_gates_backward", stream_);
    dispatch([&](auto* t) {
      cuda::deltanet_gates_backward(cast(t, d_ba), d_a_log, d_dt_bias, dg, dbeta, cast(t, ba), cast(t, a_log),
                                    cast(t, dt_bias), T, n, stream_);
    });
  }
  void gated_delta_rule_forward(void* o, const void* qkv, const float* g, const float* beta,
                                const DeltaRuleShape& shape) override {
    const cuda::OpProfile::Span span(profile_, "gated_delta_rule_forward", stream_);
    dispatch([&](auto* t) {
      if (chunked_delta_rule(shape))
        cuda::gated_delta_rule_chunked_forward(cast(t, o), cast(t, qkv), g, beta, shape, stream_);
      else
        cuda::gated_delta_rule_forward(cast(t, o), cast(t, qkv), g, beta, shape, stream_);
    });
  }
  void gated_delta_rule_backward(void* d_qkv, float* dg, float* dbeta, const void* d_o, const void* qkv,
                                 const float* g, const float* beta, const DeltaRuleShape& shape) override {
    const cuda::OpProfile::Span span(profile_, "gated_delta_rule_backward", stream_);
    dispatch([&](auto* t) {
      if (chunked_delta_rule(shape))
        cuda::gated_delta_rule_chunked_backward(cast(t, d_qkv), dg, dbeta, cast(t, d_o), cast(t, qkv), g, beta, shape,
                                                stream_);
      else
        cuda::gated_delta_rule_backward(cast(t, d_qkv), dg, dbeta, cast(t, d_o), cast(t, qkv), g, beta, shape,
                                        stream_);
    });
  }
  void gated_rmsnorm_forward(void* y, const void* x, const void* z, const void* w, int64_t N, int64_t D,
                             float eps) override {
    const cuda::OpProfile::Span span(profile_, "gated_rmsnorm_forward", stream_);
    dispatch([&](auto* t) {
      cuda::gated_rmsnorm_forward(cast(t, y), cast(t, x), cast(t, z), cast(t, w), N, D, eps, stream_);
    });
  }
  void gated_rmsnorm_backward(void* dx, void* dz, float* dw, const void* dy, const void* x, const void* z,
                              const void* w, int64_t N, int64_t D, float eps) override {
    const cuda::OpProfile::Span span(profile_, "gated_rmsnorm_backward", stream_);
    dispatch([&](auto* t) {
      cuda::gated_rmsnorm_backward(cast(t, dx), cast(t, dz), dw, cast(t, dy), cast(t, x), cast(t, z), cast(t, w), N, D,
                                   eps, stream_);
    });
  }
  void lightning_attention_forward(void* o, const void* qkv, const LightningShape& shape) override {
    const cuda::OpProfile::Span span(profile_, "lightning_attention_forward", stream_);
    dispatch([&](auto* t) {
      if (chunked_lightning(shape))
        cuda::lightning_attention_chunked_forward(cast(t, o), cast(t, qkv), shape, stream_);
      else
        cuda::lightning_attention_forward(cast(t, o), cast(t, qkv), shape, stream_);
    });
  }
  void lightning_attention_backward(void* d_qkv, const void* d_o, const void* qkv,
                                    const LightningShape& shape) override {
    const cuda::OpProfile::Span span(profile_, "lightning_attention_backward", stream_);
    dispatch([&](auto* t) {
      if (chunked_lightning(shape))
        cuda::lightning_attention_chunked_backward(cast(t, d_qkv), cast(t, d_o), cast(t, qkv), shape, stream_);
      else
        cuda::lightning_attention_backward(cast(t, d_qkv), cast(t, d_o), cast(t, qkv), shape, stream_);
    });
  }

  void add(void* y, const void* x, int64_t n) override {
    const cuda::OpProfile::Span span(profile_, "add", stream_);
    dispatch([&](auto* t) { cuda::add(cast(t, y), cast(t, x), n, stream_); });
  }
  void add_scaled(void* y, const void* x, float x_scale, float y_scale, int64_t n) override {
    const cuda::OpProfile::Span span(profile_, "add_scaled", stream_);
    dispatch([&](auto* t) { cuda::add_scaled(cast(t, y), cast(t, x), x_scale, y_scale, n, stream_); });
  }
  void scale(void* y, float alpha, int64_t n) override {
    const cuda::OpProfile::Span span(profile_, "scale", stream_);
    dispatch([&](auto* t) { cuda::scale(cast(t, y), alpha, n, stream_); });
  }

  // Chunks of rows: fp32 logits = x·wᵀ, cross-entropy (soft-capped where softcap > 0, each row's gradient weighted
  // by row_weight where given) → dlogits, dx = dlogits·w, dw += dlogitsᵀ·x; dx and dw null: the loss only. The
  // per-row losses are copied to row_loss where given.
  double head_loss_rows(void* dx, float* dw, const void* x, const void* w, const int32_t* targets,
                        const float* row_weight, float* row_loss, int64_t T, int64_t H, int64_t V, float grad_scale,
                        float softcap) override {
    const cuda::OpProfile::Span span(profile_, "head_loss", stream_);
    const int64_t chunk = head_chunk_rows(V), ld = head_logits_stride(V);
    ensure_head_buffers(std::min(chunk, T), ld, T);
    const auto es = static_cast<int64_t>(dtype_size(dtype_));
    for (int64_t r0 = 0; r0 < T; r0 += chunk) {
      const int64_t rows = std::min(chunk, T - r0);
      const char* xr = static_cast<const char*>(x) + r0 * H * es;
      gemm_->run(logits_, DType::f32, xr, w, dtype_, true, rows, V, H, 1.0f, 0.0f, false, {.c = ld});
      dispatch([&](auto* t) {
        cuda::cross_entropy(cast(t, dlogits_), row_loss_ + r0, logits_, targets + r0,
                            row_weight ? row_weight + r0 : nullptr, rows, V, ld, grad_scale, softcap, stream_);
      });
      if (!dx) continue;  // the loss only (evaluation)
      char* dxr = static_cast<char*>(dx) + r0 * H * es;
      gemm_->run(dxr, dtype_, dlogits_, w, dtype_, false, rows, H, V, 1.0f, 0.0f, false, {.a = ld});
      gemm_->run_at_b(dw, dlogits_, xr, dtype_, V, H, rows, 1.0f, 1.0f, false, {.a = ld});
    }
    cuda::sum(static_cast<double*>(scalar_), row_loss_, T, stream_);
    if (row_loss && T > 0) copy_bytes(row_loss, row_loss_, T * 4);
    double total = 0;
    download(&total, scalar_, sizeof(double));
    return total;
  }

  void moe_route_forward(float* probs, int32_t* idx, float* weights, const void* logits, int64_t T,
                         const MoeRouting& r) override {
    const cuda::OpProfile::Span span(profile_, "moe_route_forward", stream_);
    dispatch([&](auto* t) { cuda::moe_route_forward(probs, idx, weights, cast(t, logits), T, r, stream_); });
  }
  void moe_route_backward(void* d_logits, const float* d_weights, const float* probs, const int32_t* idx,
                          const float* weights, const float* aux_grad, const int32_t* seq_lens, int64_t seq, int64_t T,
                          const MoeRouting& r) override {
    const cuda::OpProfile::Span span(profile_, "moe_route_backward", stream_);
    dispatch([&](auto* t) {
      cuda::moe_route_backward(cast(t, d_logits), d_weights, probs, idx, weights, aux_grad, seq_lens, seq, T, r,
                               stream_);
    });
  }
  void moe_router_stats(int32_t* counts, float* prob_sums, const float* probs, const int32_t* idx,
                        const int32_t* seq_lens, int64_t seq, int64_t T, int64_t E, int64_t k) override {
    const cuda::OpProfile::Span span(profile_, "moe_router_stats", stream_);
    cuda::moe_router_stats(counts, prob_sums, probs, idx, seq_lens, seq, T, E, k, stream_);
  }
  void moe_permute(int32_t* offsets, int32_t* source, int32_t* row_of, const int32_t* idx, int64_t T, int64_t E,
                   int64_t k) override {
    const cuda::OpProfile::Span span(profile_, "moe_permute", stream_);
    cuda::moe_permute(offsets, source, row_of, idx, T, E, k, stream_);
  }
  void moe_gather(void* xs, const void* x, const int32_t* source, int64_t R, int64_t k, int64_t H) override {
    const cuda::OpProfile::Span span(profile_, "moe_gather", stream_);
    dispatch([&](auto* t) { cuda::moe_gather(cast(t, xs), cast(t, x), source, R, k, H, stream_); });
  }
  void moe_gather_backward(void* dx, const void* dxs, const int32_t* row_of, int64_t T, int64_t k, int64_t H,
                           bool accumulate) override {
    const cuda::OpProfile::Span span(profile_, "moe_gather_backward", stream_);
    dispatch([&](auto* t) { cuda::moe_gather_backward(cast(t, dx), cast(t, dxs), row_of, T, k, H, accumulate, stream_); });
  }
  void moe_combine_forward(void* y, const void* ys, const float* weights, const int32_t* row_of, int64_t T, int64_t k,
                           int64_t H) override {
    const cuda::OpProfile::Span span(profile_, "moe_combine_forward", stream_);
    dispatch([&](auto* t) { cuda::moe_combine_forward(cast(t, y), cast(t, ys), weights, row_of, T, k, H, stream_); });
  }
  void moe_combine_weights_backward(void* u, float* d_weights, const void* act, const float* weights,
                                    const int32_t* source, const int32_t* idx, const void* dy, const void* down_bias,
                                    int64_t R, int64_t k, int64_t I, int64_t H) override {
    const cuda::OpProfile::Span span(profile_, "moe_combine_weights_backward", stream_);
    dispatch([&](auto* t) {
      cuda::moe_combine_weights_backward(cast(t, u), d_weights, cast(t, act), weights, source, idx, cast(t, dy),
                                         cast(t, down_bias), R, k, I, H, stream_);
    });
  }
  void grouped_linear_forward(void* y, const void* x, const void* w, int64_t w_stride, const int64_t* offsets,
                              int64_t E, int64_t I, int64_t O) override {
    const cuda::OpProfile::Span span(profile_, "grouped_linear_forward", stream_);
    grouped_->forward(y, x, w, w_stride, offsets, E, I, O, dtype_);
  }
  void grouped_linear_backward(void* dx, float* dw, const void* dy, const void* x, const void* w, int64_t w_stride,
                               const int64_t* offsets, int64_t E, int64_t I, int64_t O, bool accumulate_dx) override {
    const cuda::OpProfile::Span span(profile_, "grouped_linear_backward", stream_);
    if (dx) grouped_->backward_data(dx, dy, w, w_stride, offsets, E, I, O, dtype_, accumulate_dx ? 1.0f : 0.0f);
    grouped_->backward_weight(dw, dy, x, w_stride, offsets, E, I, O, dtype_);
  }
  void moe_scale_rows_forward(void* xs, const float* weights, const int32_t* source, int64_t R, int64_t H) override {
    const cuda::OpProfile::Span span(profile_, "moe_scale_rows_forward", stream_);
    dispatch([&](auto* t) { cuda::moe_scale_rows_forward(cast(t, xs), weights, source, R, H, stream_); });
  }
  void moe_scale_rows_backward(void* dxs, float* d_weights, const void* x, const float* weights, const int32_t* source,
                               int64_t R, int64_t k, int64_t H) override {
    const cuda::OpProfile::Span span(profile_, "moe_scale_rows_backward", stream_);
    dispatch([&](auto* t) {
      cuda::moe_scale_rows_backward(cast(t, dxs), d_weights, cast(t, x), weights, source, R, k, H, stream_);
    });
  }
  void grouped_bias_forward(void* y, const void* b, int64_t b_stride, const int32_t* offsets, int64_t E, int64_t R,
                            int64_t O) override {
    const cuda::OpProfile::Span span(profile_, "grouped_bias_forward", stream_);
    dispatch([&](auto* t) { cuda::grouped_bias_forward(cast(t, y), cast(t, b), b_stride, offsets, E, R, O, stream_); });
  }
  void grouped_bias_backward(float* db, const void* dy, int64_t b_stride, const int32_t* offsets, int64_t E,
                             int64_t R, int64_t O) override {
    const cuda::OpProfile::Span span(profile_, "grouped_bias_backward", stream_);
    dispatch([&](auto* t) { cuda::grouped_bias_backward(db, cast(t, dy), b_stride, offsets, E, R, O, stream_); });
  }
  void row_sigmoid_gate_forward(void* y, const void* x, const void* g, int64_t T, int64_t H) override {
    const cuda::OpProfile::Span span(profile_, "row_sigmoid_gate_forward", stream_);
    dispatch([&](auto* t) { cuda::row_sigmoid_gate_forward(cast(t, y), cast(t, x), cast(t, g), T, H, stream_); });
  }
  void row_sigmoid_gate_backward(void* dx, void* dg, const void* dy, const void* x, const void* g, int64_t T,
                             int64_t H) override {
    const cuda::OpProfile::Span span(profile_, "row_sigmoid_gate_backward", stream_);
    dispatch([&](auto* t) {
      cuda::row_sigmoid_gate_backward(cast(t, dx), cast(t, dg), cast(t, dy), cast(t, x), cast(t, g), T, H, stream_);
    });
  }

  double sum_squares(const float* x, int64_t n) override {
    cuda::sum_squares(static_cast<double*>(scalar_), x, n, stream_);
    double total = 0;
    download(&total, scalar_, sizeof(double));
    return total;
  }

 private:
  bool chunked_delta_rule(const DeltaRuleShape& shape) const {
    return switches_.delta_rule == DeltaRuleChoice::chunked && delta_rule_chunked_supports(shape);
  }
  // Lightning attention's kernel: the chunked one for bf16 where it applies (its fp32 FMA loops ran 0.6x the
  // recurrent kernel on the H100), else the recurrent one; `return false;` here runs the recurrent kernel everywhere.
  bool chunked_lightning(const LightningShape& shape) const {
    return dtype_ == DType::bf16 && cuda::lightning_attention_chunked_supports(shape);
  }
  // Calls f with a typed null pointer naming the element type of dtype_.
  template <typename F>
  void dispatch(F&& f) {
    if (dtype_ == DType::bf16) {
      f(static_cast<bf16*>(nullptr));
    } else {
      f(static_cast<float*>(nullptr));
    }
  }
  template <typename T>
  static T* cast(T*, void* p) {
    return static_cast<T*>(p);
  }
  template <typename T>
  static const T* cast(T*, const void* p) {
    return static_cast<const T*>(p);
  }

#ifdef MEGATRAIN_HAVE_CUDNN
  // cuDNN's fused attention for this direction of this call when plan/cudnn_attention_plan.h's choice says so (the
  // plan built, its workspace and staging within the run's limit); null otherwise: our kernel runs. The choice is
  // logged once (again after set_attention_workspace), each refusal of a shape once, each graph once
  // (cudnn_attention.cpp; the graphs, cudnn_attention_graph.cpp).
  cuda::CudnnAttention* cudnn_for(const AttnShape& shape, bool backward) {
    if (!attention_choice_logged_) {
      attention_choice_logged_ = true;
      attention_limit_ = attention_plan_.workspace_limit(planned_attention_workspace_);
      cuda::log_attention_choice(attention_plan_, attention_limit_);
    }
    if (attention_plan_.choice() == AttentionChoice::ours || !cudnn_attention_gap(shape, dtype_).empty()) return nullptr;
    if (!cudnn_)
      cudnn_ = std::make_unique<cuda::CudnnAttention>(
          stream_, [this](int64_t bytes) { return alloc_bytes(bytes); }, [this](void* p) { free_bytes(p); },
          switches_);
    return cudnn_->chooses(backward, shape, attention_limit_) ? cudnn_.get() : nullptr;
  }
  void set_attention_workspace(int64_t bytes) override {
    planned_attention_workspace_ = bytes;
    attention_choice_logged_ = false;
  }
  std::unique_ptr<cuda::CudnnAttention> cudnn_;
  int64_t planned_attention_workspace_ = -1, attention_limit_ = -1;
  bool attention_choice_logged_ = false;
#endif

  // Logits and dlogits of `rows` rows `ld` apart (head_chunk.h), and T per-row losses.
  void ensure_head_buffers(int64_t rows, int64_t ld, int64_t T) {
    if (rows * ld > head_capacity_) {
      free_bytes(logits_);
      free_bytes(dlogits_);
      logits_ = static_cast<float*>(alloc_bytes(rows * ld * 4));
      dlogits_ = alloc_bytes(rows * ld * static_cast<int64_t>(dtype_size(dtype_)));
      head_capacity_ = rows * ld;
    }
    if (T > row_capacity_) {
      free_bytes(row_loss_);
      row_loss_ = static_cast<float*>(alloc_bytes(T * 4));
      row_capacity_ = T;
    }
  }

  DType dtype_;
  int device_;
  const RuntimeSwitches switches_;  // the run's: attention, the experts' GEMMs, the delta rule, op profiling
  const CudnnAttentionPlan attention_plan_{switches_};  // their attention part: the choice and the workspace limit
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<cuda::Gemm> gemm_;
  std::unique_ptr<cuda::GroupedGemm> grouped_;
  static constexpr int64_t kLandingBytes = 64 << 10;
  void* landing_ = nullptr;  // mapped page-locked host memory for small downloads (made at the first)
  void* landing_device_ = nullptr;  // its device address
  void* scalar_ = nullptr;
  float* logits_ = nullptr;
  void* dlogits_ = nullptr;
  float* row_loss_ = nullptr;
  int64_t head_capacity_ = 0, row_capacity_ = 0;
  std::unordered_map<void*, int64_t> sizes_;
  int64_t in_use_ = 0, peak_ = 0;
  cuda::OpProfile profile_;
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::vector<int> cuda_device_numa_nodes() {
  std::vector<int> nodes;
  for (int d = 0, n = cuda_device_count(); d < n; ++d) {
    char bus[32] = {};
    int node = -1;
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), d) == cudaSuccess) {
      std::string id(bus);
      std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
      std::ifstream in("/sys/bus/pci/devices/" + id + "/numa_node");
      if (!(in >> node)) node = -1;
    } else {
      cudaGetLastError();
    }
    nodes.push_back(node);
  }
  return nodes;
}

std::unique_ptr<Backend> make_cuda_backend(DType dtype, int device, const RuntimeSwitches& switches) {
  const int n = cuda_device_count();
  MT_REQUIRE(n > device, "no usable CUDA GPU (found {} device(s), asked for device {})", n, device);
  return std::make_unique<CudaBackend>(dtype, device, switches);
}

cudaStream_t cuda_compute_stream(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  MT_ASSERT(cuda != nullptr, "not a CUDA backend");
  return cuda->stream();
}

}  // namespace mt
