// mt::Backend on the host: memory from std::aligned_alloc, ops delegated to the mt::cpu reference functions.
// Invariant: holds no state; every buffer it hands out is 64-byte aligned and freed with std::free.
#include <cstdlib>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace mt {
namespace {

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }

  float* alloc_floats(int64_t n) override {
    MT_ASSERT(n >= 0);
    constexpr size_t align = 64;
    const size_t bytes = (static_cast<size_t>(n) * sizeof(float) + align - 1) / align * align;
    void* p = std::aligned_alloc(align, bytes == 0 ? align : bytes);
    MT_ASSERT(p != nullptr, "cannot allocate {} floats", n);
    return static_cast<float*>(p);
  }
  void free_floats(float* p) override { std::free(p); }
  void zero(float* p, int64_t n) override { cpu::zero(p, n); }
  void copy(float* dst, const float* src, int64_t n) override { cpu::copy(dst, src, n); }

  void linear_forward(float* y, const float* x, const float* w, const float* b, int64_t T, int64_t I,
                      int64_t O) override {
    cpu::linear_forward(y, x, w, b, T, I, O);
  }
  void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int64_t T,
                       int64_t I, int64_t O, bool accumulate_dx) override {
    cpu::linear_backward(dx, dw, db, dy, x, w, T, I, O, accumulate_dx);
  }

  void embedding_forward(float* y, const float* table, const int32_t* ids, int64_t T, int64_t H) override {
    cpu::embedding_forward(y, table, ids, T, H);
  }
  void embedding_backward(float* dtable, const float* dy, const int32_t* ids, int64_t T, int64_t H) override {
    cpu::embedding_backward(dtable, dy, ids, T, H);
  }

  void rmsnorm_forward(float* y, const float* x, const float* w, int64_t N, int64_t D, float eps) override {
    cpu::rmsnorm_forward(y, x, w, N, D, eps);
  }
  void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int64_t N, int64_t D,
                        float eps) override {
    cpu::rmsnorm_backward(dx, dw, dy, x, w, N, D, eps);
  }

  void rope_forward(float* x, const float* cos, const float* sin, const int32_t* positions, int64_t T,
                    int64_t n_heads, int64_t head_dim, int64_t rot_dim) override {
    cpu::rope_forward(x, cos, sin, positions, T, n_heads, head_dim, rot_dim);
  }
  void rope_backward(float* dx, const float* cos, const float* sin, const int32_t* positions, int64_t T,
                     int64_t n_heads, int64_t head_dim, int64_t rot_dim) override {
    cpu::rope_backward(dx, cos, sin, positions, T, n_heads, head_dim, rot_dim);
  }

  void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                         const AttnShape& shape) override {
    cpu::attention_forward(out, lse, q, k, v, shape);
  }
  void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                          const float* v, const float* out, const float* lse, const AttnShape& shape) override {
    cpu::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, shape);
  }

  void swiglu_forward(float* y, const float* gate, const float* up, int64_t n) override {
    cpu::swiglu_forward(y, gate, up, n);
  }
  void swiglu_backward(float* dgate, float* dup, const float* dy, const float* gate, const float* up,
                       int64_t n) override {
    cpu::swiglu_backward(dgate, dup, dy, gate, up, n);
  }

  void add(float* y, const float* x, int64_t n) override { cpu::add(y, x, n); }

  double head_loss(float* dx, float* dw, const float* x, const float* w, const int32_t* targets, int64_t T,
                   int64_t H, int64_t V, float grad_scale) override {
    return cpu::head_loss(dx, dw, x, w, targets, T, H, V, grad_scale);
  }

  double sum_squares(const float* x, int64_t n) override { return cpu::sum_squares(x, n); }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace mt
