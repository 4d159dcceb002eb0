// The CPU reference ops (mt::real: fp32, fp64 in the fp64 build; OpenMP + OpenBLAS), one family per .cpp; semantics
// are those of mt::Backend.
// Invariant: every op is deterministic for a given thread count and race-free; "=" outputs overwrite, "+=" accumulate.
#pragma once
#include <cstdint>

#include "backend/backend.h"

namespace mt::cpu {

void zero(real* p, int64_t n);
void copy(real* dst, const real* src, int64_t n);
void add(real* y, const real* x, int64_t n);
void scale(real* y, real alpha, int64_t n);
void add_scaled(real* y, const real* x, real x_scale, real y_scale, int64_t n);
double sum_squares(const real* x, int64_t n);

void linear_forward(real* y, const real* x, const real* w, const real* b, int64_t T, int64_t I, int64_t O);
void linear_backward(real* dx, real* dw, real* db, const real* dy, const real* x, const real* w, int64_t T,
                     int64_t I, int64_t O, bool accumulate_dx, real dy_scale);

void embedding_forward(real* y, const real* table, const int32_t* ids, int64_t T, int64_t H);
void embedding_backward(real* dtable, const real* dy, const int32_t* ids, int64_t T, int64_t H);

void rmsnorm_forward(real* y, const real* x, const real* w, int64_t N, int64_t D, real eps, real weight_offset);
// residual (may be null, may be dx): added to dx in the same pass.
void rmsnorm_backward(real* dx, real* dw, const real* dy, const real* x, const real* w, const real* residual,
                      int64_t N, int64_t D, real eps, real weight_offset);

void layernorm_forward(real* y, const real* x, const real* w, const real* b, int64_t N, int64_t D,
                       int64_t weight_rows, real eps);
void layernorm_backward(real* dx, real* dw, real* db, const real* dy, const real* x, const real* w,
                        const real* residual, int64_t N, int64_t D, int64_t weight_rows, real eps);

void normalize_rows_forward(real* y, const real* x, int64_t N, int64_t D);
void normalize_rows_backward(real* dx, const real* dy, const real* x, int64_t N, int64_t D);

void rms_normalize_forward(real* y, const real* x, int64_t N, int64_t D, real eps);
void rms_normalize_backward(real* dx, const real* dy, const real* x, int64_t N, int64_t D, real eps);
void attention_temperature(real* x, int64_t T, int64_t seq, int64_t width, real floor_scale, real attn_scale);

void rope_forward(real* x, const real* cos, const real* sin, const int32_t* positions, int64_t T,
                  int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved);
void rope_backward(real* dx, const real* cos, const real* sin, const int32_t* positions, int64_t T,
                   int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved);

void attention_forward(real* out, real* lse, const real* q, const real* k, const real* v,
                       const AttnShape& shape);
void attention_backward(real* dq, real* dk, real* dv, const real* dout, const real* q, const real* k,
                        const real* v, const real* out, const real* lse, const AttnShape& shape);
void attention_sinks_backward(real* d_sinks, const real* dout, const real* out, const real* lse,
                              const AttnShape& shape);

void glu_forward(real* y, const real* gate, const real* up, int64_t rows, int64_t cols, int64_t ld, Activation act);
void glu_backward(real* dgate, real* dup, real* y, const real* dy, const real* gate, const real* up, int64_t rows,
                  int64_t cols, int64_t ld, Activation act);

void clamped_swiglu_forward(real* y, const real* gate, const real* up, int64_t rows, int64_t cols, int64_t ld,
                            real alpha, real limit);
void clamped_swiglu_backward(real* dgate, real* dup, const real* dy, const real* gate, const real* up, int64_t rows,
                             int64_t cols, int64_t ld, real alpha, real limit);

void head_concat_forward(real* y, const real* a, const real* b, int64_t T, int64_t H, int64_t a_dim, int64_t b_dim,
                         bool shared_b);
void head_concat_backward(real* da, real* db, const real* dy, int64_t T, int64_t H, int64_t a_dim, int64_t b_dim,
                          bool shared_b);

void sigmoid_gate_forward(real* y, const real* x, const real* gate, int64_t n);
void sigmoid_gate_backward(real* dx, real* dgate, const real* dy, const real* x, const real* gate, int64_t n);

void causal_conv1d_forward(real* y, const real* x, const real* w, int64_t batch, int64_t seq, int64_t C, int64_t K,
                           const int32_t* segments);
void causal_conv1d_backward(real* dx, real* dw, const real* dy, const real* x, const real* w, int64_t batch,
                            int64_t seq, int64_t C, int64_t K, const int32_t* segments);

void deltanet_gates_forward(real* g, real* beta, const real* ba, const real* a_log, const real* dt_bias,
                            int64_t T, int64_t n);
void deltanet_gates_backward(real* d_ba, real* d_a_log, real* d_dt_bias, const real* dg, const real* dbeta,
                             const real* ba, const real* a_log, const real* dt_bias, int64_t T, int64_t n);

void gated_delta_rule_forward(real* o, const real* qkv, const real* g, const real* beta, const DeltaRuleShape& s);
void gated_delta_rule_backward(real* d_qkv, real* dg, real* dbeta, const real* d_o, const real* qkv,
                               const real* g, const real* beta, const DeltaRuleShape& s);
// The chunked (WY) form of gated_delta_rule_forward / _backward, chunks of `chunk` tokens: the CUDA kernels'
// algorithm, checked against the recurrent form by the tests.
void gated_delta_rule_chunked_forward(real* o, const real* qkv, const real* g, const real* beta,
                                      const DeltaRuleShape& s, int64_t chunk);
void gated_delta_rule_chunked_backward(real* d_qkv, real* dg, real* dbeta, const real* d_o, const real* qkv,
                                       const real* g, const real* beta, const DeltaRuleShape& s, int64_t chunk);

void lightning_attention_forward(real* o, const real* qkv, const LightningShape& s);
void lightning_attention_backward(real* d_qkv, const real* d_o, const real* qkv, const LightningShape& s);

void gated_rmsnorm_forward(real* y, const real* x, const real* z, const real* w, int64_t N, int64_t D, real eps);
void gated_rmsnorm_backward(real* dx, real* dz, real* dw, const real* dy, const real* x, const real* z,
                            const real* w, int64_t N, int64_t D, real eps);

void moe_route_forward(real* probs, int32_t* idx, real* weights, const real* logits, int64_t T,
                       const MoeRouting& r);
void moe_route_backward(real* d_logits, const real* d_weights, const real* probs, const int32_t* idx,
                        const real* weights, const real* aux_grad, const int32_t* seq_lens, int64_t seq, int64_t T,
                        const MoeRouting& r);
void moe_router_stats(int32_t* counts, real* prob_sums, const real* probs, const int32_t* idx,
                      const int32_t* seq_lens, int64_t seq, int64_t T, int64_t E, int64_t k);
void moe_permute(int32_t* offsets, int32_t* source, int32_t* row_of, const int32_t* idx, int64_t T, int64_t E,
                 int64_t k);
void moe_gather(real* xs, const real* x, const int32_t* source, int64_t R, int64_t k, int64_t H);
void moe_gather_backward(real* dx, const real* dxs, const int32_t* row_of, int64_t T, int64_t k, int64_t H,
                         bool accumulate);
void moe_combine_forward(real* y, const real* ys, const real* weights, const int32_t* row_of, int64_t T, int64_t k,
                         int64_t H);
void moe_combine_weights_backward(real* u, real* d_weights, const real* act, const real* weights,
                                  const int32_t* source, const int32_t* idx, const real* dy, const real* down_bias,
                                  int64_t R, int64_t k, int64_t I, int64_t H);
void grouped_linear_forward(real* y, const real* x, const real* w, int64_t w_stride, const int64_t* offsets,
                            int64_t E, int64_t I, int64_t O);
void grouped_linear_backward(real* dx, real* dw, const real* dy, const real* x, const real* w, int64_t w_stride,
                             const int64_t* offsets, int64_t E, int64_t I, int64_t O, bool accumulate_dx);
void moe_scale_rows_forward(real* xs, const real* weights, const int32_t* source, int64_t R, int64_t H);
void moe_scale_rows_backward(real* dxs, real* d_weights, const real* x, const real* weights, const int32_t* source,
                             int64_t R, int64_t k, int64_t H);
void grouped_bias_forward(real* y, const real* b, int64_t b_stride, const int32_t* offsets, int64_t E, int64_t R,
                          int64_t O);
void grouped_bias_backward(real* db, const real* dy, int64_t b_stride, const int32_t* offsets, int64_t E, int64_t R,
                           int64_t O);
void row_sigmoid_gate_forward(real* y, const real* x, const real* g, int64_t T, int64_t H);
void row_sigmoid_gate_backward(real* dx, real* dg, const real* dy, const real* x, const real* g, int64_t T,
                           int64_t H);

double head_loss(real* dx, real* dw, const real* x, const real* w, const int32_t* targets,
                 const real* row_weight, real* row_loss, int64_t T, int64_t H, int64_t V, real grad_scale,
                 real softcap);

}  // namespace mt::cpu
