// Gated MLP activations y = act(gate) · up, elementwise, as PyTorch's CPU kernels compute them in fp32:
// silu(g) = g / (1 + exp(−g)) (SwiGLU); gelu_tanh(g) = 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³))) (GeGLU,
// torch.nn.functional.gelu(approximate="tanh")) with the derivative of GeluBackwardKernelImpl.
// Without up (null) the activation alone, y = act(gate), as if up were 1: the same expressions, bitwise act(gate) and
// dy·act'(gate) (a product by 1 is exact), dup not written.
// Invariant: dgate and dup are overwritten; the silu path is the former SwiGLU op unchanged; the backward's y (where
// given) is the forward's expression on the same element, so the same bits.
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "core/error.h"

namespace mt::cpu {
namespace {

// torch's kBeta = M_SQRT2 · M_2_SQRTPI · 0.5 = √(2/π), formed in double and rounded to fp32, and kKappa.
constexpr real gelu_beta = static_cast<real>(1.41421356237309504880 * 1.12837916709551257390 * 0.5);
constexpr real gelu_kappa = 0.044715f;

inline real gelu_tanh(real x) {
  const real x_cube = x * x * x;
  const real inner = gelu_beta * (x + gelu_kappa * x_cube);
  return 0.5f * x * (1.f + std::tanh(inner));
}

// d gelu_tanh / dx, in torch's order of operations.
inline real gelu_tanh_grad(real x) {
  const real x_sq = x * x;
  const real x_cube = x_sq * x;
  const real inner = gelu_beta * (x + gelu_kappa * x_cube);
  const real tanh_inner = std::tanh(inner);
  const real left = 0.5f * x;
  const real right = 1.f + tanh_inner;
  const real left_derivative = 0.5f * right;
  const real tanh_derivative = 1.f - tanh_inner * tanh_inner;
  const real inner_derivative = gelu_beta * (1.f + 3.f * gelu_kappa * x_sq);
  const real right_derivative = left * tanh_derivative * inner_derivative;
  return left_derivative + right_derivative;
}

inline real silu(real g) { return g / (1.f + std::exp(-g)); }

// The gating factor of element i: up[i], or 1 for the non-gated activation (up null).
inline real up_at(const real* up, int64_t i) { return up ? up[i] : 1.f; }

void swiglu_forward(real* y, const real* gate, const real* up, int64_t n) {
#pragma omp parallel for if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = silu(gate[i]) * up_at(up, i);
}

void swiglu_backward(real* dgate, real* dup, real* y, const real* dy, const real* gate, const real* up,
                     int64_t n) {
#pragma omp parallel for if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const real g = gate[i];
    const real sig = 1.f / (1.f + std::exp(-g));
    const real value = silu(g);
    const real u = up_at(up, i);
    dgate[i] = dy[i] * u * (sig * (1.f + g * (1.f - sig)));
    if (dup) dup[i] = dy[i] * value;
    if (y) y[i] = value * u;
  }
}

void geglu_forward(real* y, const real* gate, const real* up, int64_t n) {
#pragma omp parallel for if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_tanh(gate[i]) * up_at(up, i);
}

// torch: the product's gradient dy·up goes through gelu_backward(dy·up, gate).
void geglu_backward(real* dgate, real* dup, real* y, const real* dy, const real* gate, const real* up,
                    int64_t n) {
#pragma omp parallel for if (n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const real g = gate[i];
    const real value = gelu_tanh(g);
    const real u = up_at(up, i);
    dgate[i] = (dy[i] * u) * gelu_tanh_grad(g);
    if (dup) dup[i] = dy[i] * value;
    if (y) y[i] = value * u;
  }
}

}  // namespace

void glu_forward(real* y, const real* gate, const real* up, int64_t n, Activation act) {
  switch (act) {
    case Activation::silu: return swiglu_forward(y, gate, up, n);
    case Activation::gelu_tanh: return geglu_forward(y, gate, up, n);
  }
  MT_ASSERT(false, "unknown activation {}", static_cast<int>(act));
}

void glu_backward(real* dgate, real* dup, real* y, const real* dy, const real* gate, const real* up, int64_t n,
                  Activation act) {
  switch (act) {
    case Activation::silu: return swiglu_backward(dgate, dup, y, dy, gate, up, n);
    case Activation::gelu_tanh: return geglu_backward(dgate, dup, y, dy, gate, up, n);
  }
  MT_ASSERT(false, "unknown activation {}", static_cast<int>(act));
}

}  // namespace mt::cpu
