// mt::Backend on the host: memory from std::aligned_alloc, ops delegated to the mt::cpu reference functions.
// Invariant: holds no state; dtype() is mt::real's (fp32; f64 in the fp64 build, core/real.h), so every tensor argument
// is a real array; every buffer it hands out is 64-byte aligned and freed with std::free; ops complete before they
// return.
#include <cstdlib>
#include <cstring>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace mt {
namespace {

real* f(void* p) { return static_cast<real*>(p); }
const real* f(const void* p) { return static_cast<const real*>(p); }

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  DType dtype() const override { return real_dtype; }

  void* alloc_bytes(int64_t bytes) override {
    MT_ASSERT(bytes >= 0);
    constexpr size_t align = 64;
    const size_t rounded = (static_cast<size_t>(bytes) + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded);
    MT_ASSERT(p != nullptr, "cannot allocate {} bytes", bytes);
    return p;
  }
  void free_bytes(void* p) override { std::free(p); }
  bool host_memory() const override { return true; }
  void upload(void* dst, const void* src, int64_t bytes) override { copy_bytes(dst, src, bytes); }
  void download(void* dst, const void* src, int64_t bytes) override { copy_bytes(dst, src, bytes); }
  void copy_bytes(void* dst, const void* src, int64_t bytes) override {
    MT_ASSERT(bytes >= 0 && bytes % 4 == 0);
    if (bytes > 0 && dst != src) std::memmove(dst, src, static_cast<size_t>(bytes));
  }
  void zero_bytes(void* p, int64_t bytes) override {
    MT_ASSERT(bytes >= 0 && bytes % 4 == 0);
    if (bytes > 0) std::memset(p, 0, static_cast<size_t>(bytes));
  }
  void synchronize() override {}
  int64_t peak_memory_bytes() const override { return 0; }
  int64_t device_memory_bytes() const override { return 0; }

  void linear_forward(void* y, const void* x, const void* w, const void* b, int64_t T, int64_t I,
                      int64_t O) override {
    cpu::linear_forward(f(y), f(x), f(w), f(b), T, I, O);
  }
  void linear_forward_add(void* y, const void* x, const void* w, const void* b, const void* residual, int64_t T,
                          int64_t I, int64_t O, float scale) override {
    cpu::linear_forward(f(y), f(x), f(w), f(b), T, I, O);
    if (scale != 1.0f) cpu::scale(f(y), scale, T * O);
    cpu::add(f(y), f(residual), T * O);
  }
  void linear_backward(void* dx, real* dw, real* db, const void* dy, const void* x, const void* w, int64_t T,
                       int64_t I, int64_t O, bool accumulate_dx, float dy_scale) override {
    cpu::linear_backward(f(dx), dw, db, f(dy), f(x), f(w), T, I, O, accumulate_dx, dy_scale);
  }

  void embedding_forward(void* y, const void* table, const int32_t* ids, int64_t T, int64_t H) override {
    cpu::embedding_forward(f(y), f(table), ids, T, H);
  }
  void embedding_backward(real* dtable, const void* dy, const int32_t* ids, int64_t T, int64_t H) override {
    cpu::embedding_backward(dtable, f(dy), ids, T, H);
  }

  void rmsnorm_forward_fp32_product(void* y, const void* x, const void* w, int64_t N, int64_t D,
                                    float eps) override {  // fp32 throughout: the plain norm
    cpu::rmsnorm_forward(f(y), f(x), f(w), N, D, eps, 0.f);
  }
  void rmsnorm_forward(void* y, const void* x, const void* w, int64_t N, int64_t D, float eps,
                       float weight_offset) override {
    cpu::rmsnorm_forward(f(y), f(x), f(w), N, D, eps, weight_offset);
  }
  void rmsnorm_backward(void* dx, real* dw, const void* dy, const void* x, const void* w, int64_t N, int64_t D,
                        float eps, float weight_offset) override {
    cpu::rmsnorm_backward(f(dx), dw, f(dy), f(x), f(w), nullptr, N, D, eps, weight_offset);
  }
  void rmsnorm_backward_add(void* dx, real* dw, const void* dy, const void* x, const void* w, const void* residual,
                            int64_t N, int64_t D, float eps, float weight_offset) override {
    cpu::rmsnorm_backward(f(dx), dw, f(dy), f(x), f(w), f(residual), N, D, eps, weight_offset);
  }

  void layernorm_forward(void* y, const void* x, const void* w, const void* b, int64_t N, int64_t D,
                         int64_t weight_rows, float eps) override {
    cpu::layernorm_forward(f(y), f(x), f(w), f(b), N, D, weight_rows, eps);
  }
  void layernorm_backward(void* dx, real* dw, real* db, const void* dy, const void* x, const void* w,
                          const void* residual, int64_t N, int64_t D, int64_t weight_rows, float eps) override {
    cpu::layernorm_backward(f(dx), dw, db, f(dy), f(x), f(w), f(residual), N, D, weight_rows, eps);
  }

  void rms_normalize_forward(void* y, const void* x, int64_t N, int64_t D, float eps) override {
    cpu::rms_normalize_forward(f(y), f(x), N, D, eps);
  }
  void rms_normalize_backward(void* dx, const void* dy, const void* x, int64_t N, int64_t D, float eps) override {
    cpu::rms_normalize_backward(f(dx), f(dy), f(x), N, D, eps);
  }
  void attention_temperature(void* x, int64_t T, int64_t seq, int64_t width, float floor_scale,
                             float attn_scale) override {
    cpu::attention_temperature(f(x), T, seq, width, floor_scale, attn_scale);
  }
  void normalize_rows_forward(void* y, const void* x, int64_t N, int64_t D) override {
    cpu::normalize_rows_forward(f(y), f(x), N, D);
  }
  void normalize_rows_backward(real* dx, const real* dy, const void* x, int64_t N, int64_t D) override {
    cpu::normalize_rows_backward(dx, dy, f(x), N, D);
  }

  void rope_forward(void* x, const real* cos, const real* sin, const int32_t* positions, int64_t T,
                    int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved) override {
    cpu::rope_forward(f(x), cos, sin, positions, T, n_heads, head_dim, rot_dim, interleaved);
  }
  void rope_backward(void* dx, const real* cos, const real* sin, const int32_t* positions, int64_t T,
                     int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved) override {
    cpu::rope_backward(f(dx), cos, sin, positions, T, n_heads, head_dim, rot_dim, interleaved);
  }

  void attention_forward(void* out, real* lse, const void* q, const void* k, const void* v,
                         const AttnShape& shape) override {
    cpu::attention_forward(f(out), lse, f(q), f(k), f(v), shape);
  }
  void attention_backward(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                          const void* v, const void* out, const real* lse, const AttnShape& shape) override {
    cpu::attention_backward(f(dq), f(dk), f(dv), f(dout), f(q), f(k), f(v), f(out), lse, shape);
  }

  void attention_sinks_backward(real* d_sinks, const void* dout, const void* out, const real* lse,
                                const AttnShape& shape) override {
    cpu::attention_sinks_backward(d_sinks, f(dout), f(out), lse, shape);
  }
  void clamped_swiglu_forward(void* y, const void* gate, const void* up, int64_t rows, int64_t cols, int64_t ld,
                              float alpha, float limit) override {
    cpu::clamped_swiglu_forward(f(y), f(gate), f(up), rows, cols, ld, alpha, limit);
  }
  void clamped_swiglu_backward(void* dgate, void* dup, const void* dy, const void* gate, const void* up, int64_t rows,
                               int64_t cols, int64_t ld, float alpha, float limit) override {
    cpu::clamped_swiglu_backward(f(dgate), f(dup), f(dy), f(gate), f(up), rows, cols, ld, alpha, limit);
  }
  void grouped_bias_forward(void* y, const void* b, int64_t b_stride, const int32_t* offsets, int64_t E, int64_t R,
                            int64_t O) override {
    cpu::grouped_bias_forward(f(y), f(b), b_stride, offsets, E, R, O);
  }
  void grouped_bias_backward(real* db, const void* dy, int64_t b_stride, const int32_t* offsets, int64_t E,
                             int64_t R, int64_t O) override {
    cpu::grouped_bias_backward(db, f(dy), b_stride, offsets, E, R, O);
  }
  void glu_forward(void* y, const void* gate, const void* up, int64_t rows, int64_t cols, int64_t ld,
                   Activation act) override {
    cpu::glu_forward(f(y), f(gate), f(up), rows, cols, ld, act);
  }
  void glu_backward(void* dgate, void* dup, void* y, const void* dy, const void* gate, const void* up, int64_t rows,
                    int64_t cols, int64_t ld, Activation act) override {
    cpu::glu_backward(f(dgate), f(dup), f(y), f(dy), f(gate), f(up), rows, cols, ld, act);
  }

  void head_concat_forward(void* y, const void* a, const void* b, int64_t T, int64_t H, int64_t a_dim, int64_t b_dim,
                           bool shared_b) override {
    cpu::head_concat_forward(f(y), f(a), f(b), T, H, a_dim, b_dim, shared_b);
  }
  void head_concat_backward(void* da, void* db, const void* dy, int64_t T, int64_t H, int64_t a_dim, int64_t b_dim,
                            bool shared_b) override {
    cpu::head_concat_backward(f(da), f(db), f(dy), T, H, a_dim, b_dim, shared_b);
  }
  void sigmoid_gate_forward(void* y, const void* x, const void* gate, int64_t n) override {
    cpu::sigmoid_gate_forward(f(y), f(x), f(gate), n);
  }
  void sigmoid_gate_backward(void* dx, void* dgate, const void* dy, const void* x, const void* gate,
                             int64_t n) override {
    cpu::sigmoid_gate_backward(f(dx), f(dgate), f(dy), f(x), f(gate), n);
  }

  void causal_conv1d_forward(void* y, const void* x, const void* w, int64_t batch, int64_t seq, int64_t C, int64_t K,
                             const int32_t* segments) override {
    cpu::causal_conv1d_forward(f(y), f(x), f(w), batch, seq, C, K, segments);
  }
  void causal_conv1d_backward(void* dx, real* dw, const void* dy, const void* x, const void* w, int64_t batch,
                              int64_t seq, int64_t C, int64_t K, const int32_t* segments) override {
    cpu::causal_conv1d_backward(f(dx), dw, f(dy), f(x), f(w), batch, seq, C, K, segments);
  }

  void deltanet_gates_forward(real* g, real* beta, const void* ba, const void* a_log, const void* dt_bias,
                              int64_t T, int64_t n) override {
    cpu::deltanet_gates_forward(g, beta, f(ba), f(a_log), f(dt_bias), T, n);
  }
  void deltanet_gates_backward(void* d_ba, real* d_a_log, real* d_dt_bias, const real* dg, const real* dbeta,
                               const void* ba, const void* a_log, const void* dt_bias, int64_t T, int64_t n) override {
    cpu::deltanet_gates_backward(f(d_ba), d_a_log, d_dt_bias, dg, dbeta, f(ba), f(a_log), f(dt_bias), T, n);
  }

  void gated_delta_rule_forward(void* o, const void* qkv, const real* g, const real* beta,
                                const DeltaRuleShape& shape) override {
    cpu::gated_delta_rule_forward(f(o), f(qkv), g, beta, shape);
  }
  void gated_delta_rule_backward(void* d_qkv, real* dg, real* dbeta, const void* d_o, const void* qkv,
                                 const real* g, const real* beta, const DeltaRuleShape& shape) override {
    cpu::gated_delta_rule_backward(f(d_qkv), dg, dbeta, f(d_o), f(qkv), g, beta, shape);
  }

  void gated_rmsnorm_forward(void* y, const void* x, const void* z, const void* w, int64_t N, int64_t D,
                             float eps) override {
    cpu::gated_rmsnorm_forward(f(y), f(x), f(z), f(w), N, D, eps);
  }
  void gated_rmsnorm_backward(void* dx, void* dz, real* dw, const void* dy, const void* x, const void* z,
                              const void* w, int64_t N, int64_t D, float eps) override {
    cpu::gated_rmsnorm_backward(f(dx), f(dz), dw, f(dy), f(x), f(z), f(w), N, D, eps);
  }

  void lightning_attention_forward(void* o, const void* qkv, const LightningShape& shape) override {
    cpu::lightning_attention_forward(f(o), f(qkv), shape);
  }
  void lightning_attention_backward(void* d_qkv, const void* d_o, const void* qkv,
                                    const LightningShape& shape) override {
    cpu::lightning_attention_backward(f(d_qkv), f(d_o), f(qkv), shape);
  }

  void add(void* y, const void* x, int64_t n) override { cpu::add(f(y), f(x), n); }
  void add_scaled(void* y, const void* x, float x_scale, float y_scale, int64_t n) override {
    cpu::add_scaled(f(y), f(x), x_scale, y_scale, n);
  }
  void scale(void* y, float alpha, int64_t n) override { cpu::scale(f(y), alpha, n); }

  double head_loss_rows(void* dx, real* dw, const void* x, const void* w, const int32_t* targets,
                        const real* row_weight, real* row_loss, int64_t T, int64_t H, int64_t V, float grad_scale,
                        float softcap) override {
    return cpu::head_loss(f(dx), dw, f(x), f(w), targets, row_weight, row_loss, T, H, V, grad_scale, softcap);
  }

  void moe_route_forward(real* probs, int32_t* idx, real* weights, const void* logits, int64_t T,
                         const MoeRouting& r) override {
    cpu::moe_route_forward(probs, idx, weights, f(logits), T, r);
  }
  void moe_route_backward(void* d_logits, const real* d_weights, const real* probs, const int32_t* idx,
                          const real* weights, const real* aux_grad, const int32_t* seq_lens, int64_t seq, int64_t T,
                          const MoeRouting& r) override {
    cpu::moe_route_backward(f(d_logits), d_weights, probs, idx, weights, aux_grad, seq_lens, seq, T, r);
  }
  void moe_router_stats(int32_t* counts, real* prob_sums, const real* probs, const int32_t* idx,
                        const int32_t* seq_lens, int64_t seq, int64_t T, int64_t E, int64_t k) override {
    cpu::moe_router_stats(counts, prob_sums, probs, idx, seq_lens, seq, T, E, k);
  }
  void moe_permute(int32_t* offsets, int32_t* source, int32_t* row_of, const int32_t* idx, int64_t T, int64_t E,
                   int64_t k) override {
    cpu::moe_permute(offsets, source, row_of, idx, T, E, k);
  }
  void moe_gather(void* xs, const void* x, const int32_t* source, int64_t R, int64_t k, int64_t H) override {
    cpu::moe_gather(f(xs), f(x), source, R, k, H);
  }
  void moe_gather_backward(void* dx, const void* dxs, const int32_t* row_of, int64_t T, int64_t k, int64_t H,
                           bool accumulate) override {
    cpu::moe_gather_backward(f(dx), f(dxs), row_of, T, k, H, accumulate);
  }
  void moe_combine_forward(void* y, const void* ys, const real* weights, const int32_t* row_of, int64_t T, int64_t k,
                           int64_t H) override {
    cpu::moe_combine_forward(f(y), f(ys), weights, row_of, T, k, H);
  }
  void moe_combine_weights_backward(void* u, real* d_weights, const void* act, const real* weights,
                                    const int32_t* source, const int32_t* idx, const void* dy, const void* down_bias,
                                    int64_t R, int64_t k, int64_t I, int64_t H) override {
    cpu::moe_combine_weights_backward(f(u), d_weights, f(act), weights, source, idx, f(dy), f(down_bias), R, k, I, H);
  }
  void grouped_linear_forward(void* y, const void* x, const void* w, int64_t w_stride, const int64_t* offsets,
                              int64_t E, int64_t I, int64_t O) override {
    cpu::grouped_linear_forward(f(y), f(x), f(w), w_stride, offsets, E, I, O);
  }
  void grouped_linear_backward(void* dx, real* dw, const void* dy, const void* x, const void* w, int64_t w_stride,
                               const int64_t* offsets, int64_t E, int64_t I, int64_t O, bool accumulate_dx) override {
    cpu::grouped_linear_backward(f(dx), dw, f(dy), f(x), f(w), w_stride, offsets, E, I, O, accumulate_dx);
  }
  void moe_scale_rows_forward(void* xs, const real* weights, const int32_t* source, int64_t R, int64_t H) override {
    cpu::moe_scale_rows_forward(f(xs), weights, source, R, H);
  }
  void moe_scale_rows_backward(void* dxs, real* d_weights, const void* x, const real* weights, const int32_t* source,
                               int64_t R, int64_t k, int64_t H) override {
    cpu::moe_scale_rows_backward(f(dxs), d_weights, f(x), weights, source, R, k, H);
  }
  void row_sigmoid_gate_forward(void* y, const void* x, const void* g, int64_t T, int64_t H) override {
    cpu::row_sigmoid_gate_forward(f(y), f(x), f(g), T, H);
  }
  void row_sigmoid_gate_backward(void* dx, void* dg, const void* dy, const void* x, const void* g, int64_t T,
                             int64_t H) override {
    cpu::row_sigmoid_gate_backward(f(dx), f(dg), f(dy), f(x), f(g), T, H);
  }

  double sum_squares(const real* x, int64_t n) override { return cpu::sum_squares(x, n); }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace mt
