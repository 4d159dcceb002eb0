// Gated MLP activations y = act(gate) · up, elementwise, as PyTorch's CPU kernels compute them in fp32:
// silu(g) = g / (1 + exp(−g)) (SwiGLU); gelu_tanh(g) = 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³))) (GeGLU,
// torch.nn.functional.gelu(approximate="tanh")) with the derivative of GeluBackwardKernelImpl.
// Without up (null) the activation alone, y = act(gate), as if up were 1: the same expressions, bitwise act(gate) and
// dy·act'(gate) (a product by 1 is exact), dup not written.
// y and dy are [rows, cols]; gate, up, dgate and dup rows lie ld apart (ld = 2·cols: one [gate | up] buffer).
// Invariant: dgate and dup are overwritten; each element's expressions are the same whatever ld (the silu path's are
// the former SwiGLU op's); the backward's y (where given) is the forward's expression on the same element, so the
// same bits.
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

// The activations' value and derivative: SwiGLU's silu with the sigmoid's derivative, GeGLU's gelu_tanh.
struct Silu {
  static real value(real g) { return silu(g); }
  static real derivative(real g) {
    const real sig = 1.f / (1.f + std::exp(-g));
    return sig * (1.f + g * (1.f - sig));
  }
};
struct GeluTanh {
  static real value(real g) { return gelu_tanh(g); }
  static real derivative(real g) { return gelu_tanh_grad(g); }
};

// The gating factor at j: up[j], or 1 for the non-gated activation (up null).
inline real up_at(const real* up, int64_t j) { return up ? up[j] : 1.f; }

template <typename A>
void forward(real* y, const real* gate, const real* up, StridedRows m) {
#pragma omp parallel for if (m.n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < m.n; ++i) {
    const int64_t j = m.at(i);
    y[i] = A::value(gate[j]) * up_at(up, j);
  }
}

// torch: the product's gradient dy·up goes through the activation's backward (gelu_backward(dy·up, gate)).
template <typename A>
void backward(real* dgate, real* dup, real* y, const real* dy, const real* gate, const real* up, StridedRows m) {
#pragma omp parallel for if (m.n > parallel_min_elems) schedule(static)
  for (int64_t i = 0; i < m.n; ++i) {
    const int64_t j = m.at(i);
    const real g = gate[j];
    const real value = A::value(g);
    const real u = up_at(up, j);
    dgate[j] = (dy[i] * u) * A::derivative(g);
    if (dup) dup[j] = dy[i] * value;
    if (y) y[i] = value * u;
  }
}

}  // namespace

void glu_forward(real* y, const real* gate, const real* up, int64_t rows, int64_t cols, int64_t ld, Activation act) {
  const StridedRows m("glu_forward", rows, cols, ld);
  switch (act) {
    case Activation::silu: return forward<Silu>(y, gate, up, m);
    case Activation::gelu_tanh: return forward<GeluTanh>(y, gate, up, m);
  }
  MT_ASSERT(false, "unknown activation {}", static_cast<int>(act));
}

void glu_backward(real* dgate, real* dup, real* y, const real* dy, const real* gate, const real* up, int64_t rows,
                  int64_t cols, int64_t ld, Activation act) {
  const StridedRows m("glu_backward", rows, cols, ld);
  switch (act) {
    case Activation::silu: return backward<Silu>(dgate, dup, y, dy, gate, up, m);
    case Activation::gelu_tanh: return backward<GeluTanh>(dgate, dup, y, dy, gate, up, m);
  }
  MT_ASSERT(false, "unknown activation {}", static_cast<int>(act));
}

}  // namespace mt::cpu
