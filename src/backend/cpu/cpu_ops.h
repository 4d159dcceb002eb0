// The CPU reference ops (fp32, OpenMP + OpenBLAS), one family per .cpp; semantics are those of mt::Backend.
// Invariant: every op is deterministic for a given thread count and race-free; "=" outputs overwrite, "+=" accumulate.
#pragma once
#include <cstdint>

#include "backend/backend.h"

namespace mt::cpu {

void zero(float* p, int64_t n);
void copy(float* dst, const float* src, int64_t n);
void add(float* y, const float* x, int64_t n);
void scale(float* y, float alpha, int64_t n);
double sum_squares(const float* x, int64_t n);

void linear_forward(float* y, const float* x, const float* w, const float* b, int64_t T, int64_t I, int64_t O);
void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int64_t T,
                     int64_t I, int64_t O, bool accumulate_dx);

void embedding_forward(float* y, const float* table, const int32_t* ids, int64_t T, int64_t H);
void embedding_backward(float* dtable, const float* dy, const int32_t* ids, int64_t T, int64_t H);

void rmsnorm_forward(float* y, const float* x, const float* w, int64_t N, int64_t D, float eps, float weight_offset);
// residual (may be null, may be dx): added to dx in the same pass.
void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, const float* residual,
                      int64_t N, int64_t D, float eps, float weight_offset);

void layernorm_forward(float* y, const float* x, const float* w, const float* b, int64_t N, int64_t D,
                       int64_t weight_rows, float eps);
void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                        const float* residual, int64_t N, int64_t D, int64_t weight_rows, float eps);

void normalize_rows_forward(float* y, const float* x, int64_t N, int64_t D);
void normalize_rows_backward(float* dx, const float* dy, const float* x, int64_t N, int64_t D);

void rms_normalize_forward(float* y, const float* x, int64_t N, int64_t D, float eps);
void rms_normalize_backward(float* dx, const float* dy, const float* x, int64_t N, int64_t D, float eps);
void attention_temperature(float* x, int64_t T, int64_t seq, int64_t width, float floor_scale, float attn_scale);

void rope_forward(float* x, const float* cos, const float* sin, const int32_t* positions, int64_t T,
                  int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved);
void rope_backward(float* dx, const float* cos, const float* sin, const int32_t* positions, int64_t T,
                   int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool interleaved);

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const AttnShape& shape);
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                        const float* v, const float* out, const float* lse, const AttnShape& shape);
void attention_sinks_backward(float* d_sinks, const float* dout, const float* out, const float* lse,
                              const AttnShape& shape);

void glu_forward(float* y, const float* gate, const float* up, int64_t n, Activation act);
void glu_backward(float* dgate, float* dup, float* y, const float* dy, const float* gate, const float* up, int64_t n,
                  Activation act);

void clamped_swiglu_forward(float* y, const float* gate, const float* up, int64_t n, float alpha, float limit);
void clamped_swiglu_backward(float* dgate, float* dup, const float* dy, const float* gate, const float* up, int64_t n,
                             float alpha, float limit);

void head_concat_forward(float* y, const float* a, const float* b, int64_t T, int64_t H, int64_t a_dim, int64_t b_dim,
                         bool shared_b);
void head_concat_backward(float* da, float* db, const float* dy, int64_t T, int64_t H, int64_t a_dim, int64_t b_dim,
                          bool shared_b);

void sigmoid_gate_forward(float* y, const float* x, const float* gate, int64_t n);
void sigmoid_gate_backward(float* dx, float* dgate, const float* dy, const float* x, const float* gate, int64_t n);

void causal_conv1d_forward(float* y, const float* x, const float* w, int64_t batch, int64_t seq, int64_t C, int64_t K,
                           const int32_t* segments);
void causal_conv1d_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int64_t batch,
                            int64_t seq, int64_t C, int64_t K, const int32_t* segments);

void deltanet_gates_forward(float* g, float* beta, const float* ba, const float* a_log, const float* dt_bias,
                            int64_t T, int64_t n);
void deltanet_gates_backward(float* d_ba, float* d_a_log, float* d_dt_bias, const float* dg, const float* dbeta,
                             const float* ba, const float* a_log, const float* dt_bias, int64_t T, int64_t n);

void gated_delta_rule_forward(float* o, const float* qkv, const float* g, const float* beta, const DeltaRuleShape& s);
void gated_delta_rule_backward(float* d_qkv, float* dg, float* dbeta, const float* d_o, const float* qkv,
                               const float* g, const float* beta, const DeltaRuleShape& s);
// The chunked (WY) form of gated_delta_rule_forward / _backward, chunks of `chunk` tokens: the CUDA kernels'
// algorithm, checked against the recurrent form by the tests.
void gated_delta_rule_chunked_forward(float* o, const float* qkv, const float* g, const float* beta,
                                      const DeltaRuleShape& s, int64_t chunk);
void gated_delta_rule_chunked_backward(float* d_qkv, float* dg, float* dbeta, const float* d_o, const float* qkv,
                                       const float* g, const float* beta, const DeltaRuleShape& s, int64_t chunk);

void gated_rmsnorm_forward(float* y, const float* x, const float* z, const float* w, int64_t N, int64_t D, float eps);
void gated_rmsnorm_backward(float* dx, float* dz, float* dw, const float* dy, const float* x, const float* z,
                            const float* w, int64_t N, int64_t D, float eps);

void moe_route_forward(float* probs, int32_t* idx, float* weights, const float* logits, int64_t T,
                       const MoeRouting& r);
void moe_route_backward(float* d_logits, const float* d_weights, const float* probs, const int32_t* idx,
                        const float* weights, const float* aux_grad, const int32_t* seq_lens, int64_t seq, int64_t T,
                        const MoeRouting& r);
void moe_router_stats(int32_t* counts, float* prob_sums, const float* probs, const int32_t* idx,
                      const int32_t* seq_lens, int64_t seq, int64_t T, int64_t E, int64_t k);
void moe_permute(int32_t* offsets, int32_t* source, int32_t* row_of, const int32_t* idx, int64_t T, int64_t E,
                 int64_t k);
void moe_gather(float* xs, const float* x, const int32_t* source, int64_t R, int64_t k, int64_t H);
void moe_gather_backward(float* dx, const float* dxs, const int32_t* row_of, int64_t T, int64_t k, int64_t H,
                         bool accumulate);
void moe_combine_forward(float* y, const float* ys, const float* weights, const int32_t* row_of, int64_t T, int64_t k,
                         int64_t H);
void moe_combine_weights_backward(float* u, float* d_weights, const float* act, const float* weights,
                                  const int32_t* source, const int32_t* idx, const float* dy, const float* down_bias,
                                  int64_t R, int64_t k, int64_t I, int64_t H);
void grouped_linear_forward(float* y, const float* x, const float* w, int64_t w_stride, const int64_t* offsets,
                            int64_t E, int64_t I, int64_t O);
void grouped_linear_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int64_t w_stride,
                             const int64_t* offsets, int64_t E, int64_t I, int64_t O, bool accumulate_dx);
void moe_scale_rows_forward(float* xs, const float* weights, const int32_t* source, int64_t R, int64_t H);
void moe_scale_rows_backward(float* dxs, float* d_weights, const float* x, const float* weights, const int32_t* source,
                             int64_t R, int64_t k, int64_t H);
void grouped_bias_forward(float* y, const float* b, int64_t b_stride, const int32_t* offsets, int64_t E, int64_t R,
                          int64_t O);
void grouped_bias_backward(float* db, const float* dy, int64_t b_stride, const int32_t* offsets, int64_t E, int64_t R,
                           int64_t O);
void row_sigmoid_gate_forward(float* y, const float* x, const float* g, int64_t T, int64_t H);
void row_sigmoid_gate_backward(float* dx, float* dg, const float* dy, const float* x, const float* g, int64_t T,
                           int64_t H);

double head_loss(float* dx, float* dw, const float* x, const float* w, const int32_t* targets,
                 const float* row_weight, float* row_loss, int64_t T, int64_t H, int64_t V, float grad_scale,
                 float softcap);

}  // namespace mt::cpu
