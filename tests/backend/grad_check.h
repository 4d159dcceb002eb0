// Test helpers for the backend ops: seeded random tensors, central finite differences and relative errors.
// Invariant: everything is deterministic (fixed seeds) and compares in fp64.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace mt::test {

inline std::vector<float> random_floats(int64_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Σ r·y in fp64: the random linear functional whose gradient the backward ops are checked against.
inline double project(const std::vector<float>& r, const std::vector<float>& y) {
  double s = 0.0;
  for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(r[i]) * y[i];
  return s;
}

// ∂loss/∂p by central differences, perturbing p in place (restored afterwards).
inline std::vector<double> numeric_grad(std::vector<float>& p, const std::function<double()>& loss, float h = 1e-2f) {
  std::vector<double> g(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    const float saved = p[i];
    p[i] = saved + h;
    const double up = loss();
    p[i] = saved - h;
    const double down = loss();
    p[i] = saved;
    g[i] = (up - down) / (2.0 * static_cast<double>(h));
  }
  return g;
}

// ‖a − b‖ / max(‖b‖, tiny).
template <typename A, typename B>
double rel_err(const std::vector<A>& a, const std::vector<B>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

// |a − b| <= tol · max(1, |b|): a mixed absolute/relative comparison that Catch2 2.x and 3.x both accept in CHECK.
inline bool approx_equal(double a, double b, double tol) { return std::abs(a - b) <= tol * std::max(1.0, std::abs(b)); }

}  // namespace mt::test
