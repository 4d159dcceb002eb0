// CUDA kernels (kernels/ops/kernels.h) and the CUDA backend's ops against the CPU reference (the mt::Backend of
// make_cpu_backend(), or fp64 loops here for ops without one): per op a table of named rows (shapes × options) ×
// {fp32, bf16}, forward and backward, ‖out − ref‖/‖ref‖ within tolerance<T>; bf16 inputs are rounded first and compared
// with the fp32 reference of the rounded inputs; deterministic ops run twice, compared bit for bit. Each row is a
// DYNAMIC_SECTION named after what it covers, so `tests_gpu "<case>" -c "<row>"` runs one row.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "backend/backend.h"
#include "kernels/runtime/cuda_backend.h"
#include "core/activation.h"
#include "gpu/gpu_test_util.h"
#include "kernels/ops/kernels.h"

namespace {

using namespace mt::test;
namespace cu = mt::cuda;
using mt::Activation;
using mt::DType;

std::vector<int32_t> random_ints(int64_t n, int32_t lo, int32_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t& x : v) x = dist(rng);
  return v;
}

std::vector<float> tail(const std::vector<float>& v, int64_t from) { return {v.begin() + from, v.end()}; }

// Rows [r0, r1) of a row-major [*, D] tensor.
std::vector<float> rows_of(const std::vector<float>& v, int64_t r0, int64_t r1, int64_t D) {
  return {v.begin() + r0 * D, v.begin() + r1 * D};
}

bool all_zero(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return x == 0.f; });
}

const char* act_label(Activation a) { return a == Activation::silu ? "silu" : "gelu_tanh"; }

// cos/sin tables [max_pos, rot_dim/2] with frequency i at column i (base 10000).
void rope_tables(int64_t max_pos, int64_t rot_dim, std::vector<float>& cos, std::vector<float>& sin) {
  const int64_t half = rot_dim / 2;
  cos.assign(static_cast<size_t>(max_pos * half), 0.f);
  sin.assign(static_cast<size_t>(max_pos * half), 0.f);
  for (int64_t p = 0; p < max_pos; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * std::pow(10000.0, -2.0 * static_cast<double>(i) / rot_dim);
      cos[p * half + i] = static_cast<float>(std::cos(angle));
      sin[p * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

// ALiBi slopes as Press et al. / Baichuan 2 build them: for n a power of two start^(h+1) with start = 2^(−8/n); for
// other n the closest power of two c below, then every other slope of 2c for the remaining heads.
std::vector<float> alibi_slopes(int64_t n) {
  auto power_of_two = [](int64_t m) {
    const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(m)) - 3.0)));
    std::vector<float> s;
    for (int64_t i = 0; i < m; ++i) s.push_back(static_cast<float>(std::pow(start, static_cast<double>(i + 1))));
    return s;
  };
  const int64_t closest = int64_t{1} << static_cast<int>(std::floor(std::log2(static_cast<double>(n))));
  std::vector<float> slopes = power_of_two(closest);
  const std::vector<float> extra = power_of_two(2 * closest);
  for (int64_t i = 0; static_cast<int64_t>(slopes.size()) < n; i += 2) slopes.push_back(extra[static_cast<size_t>(i)]);
  return slopes;
}

// torch's gelu(approximate='tanh') and its derivative in fp64.
double gelu_tanh(double x) {
  const double beta = std::sqrt(2.0 / M_PI), kappa = 0.044715;
  return 0.5 * x * (1.0 + std::tanh(beta * (x + kappa * x * x * x)));
}
double gelu_tanh_derivative(double x) {
  const double beta = std::sqrt(2.0 / M_PI), kappa = 0.044715;
  const double t = std::tanh(beta * (x + kappa * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * beta * (1.0 + 3.0 * kappa * x * x);
}

}  // namespace

TEST_CASE("cuda add, scale, cast and accumulate match the reference", "[gpu][elementwise]") {
  MT_REQUIRE_GPU();
  for (const int64_t n : {int64_t{1}, int64_t{13}, int64_t{4099}, int64_t{1} << 20}) {
    for (const int64_t off : {int64_t{0}, int64_t{1}}) {  // off = 1: pointers not 16-byte aligned (scalar path)
      INFO("n = " << n << ", offset " << off);
      const auto x0 = random_floats(n + off, 1), y0 = random_floats(n + off, 2);
      for_each_dtype([&]<typename T>() {
        INFO(dtype_label<T>);
        const auto x = rounded<T>(x0), y = rounded<T>(y0);
        auto dx = upload<T>(x), dy = upload<T>(y);
        cu::add<T>(dy->get() + off, dx->get() + off, n, test_stream());
        std::vector<float> want = y;
        cpu().add(want.data() + off, x.data() + off, n);
        check_close("add", download(*dy), want, tolerance<T>);

        // scale: one fp32 multiply and one rounding to T, so exact against the rounded fp32 reference.
        for (const float alpha : {0.37f, -2.f, 0.f}) {
          INFO("scale alpha = " << alpha);
          auto d_y = upload<T>(y);
          cu::scale<T>(d_y->get() + off, alpha, n, test_stream());
          std::vector<float> scaled = y;
          cpu().scale(scaled.data() + off, alpha, n);
          check_close("scale", download(*d_y), rounded<T>(scaled), 0.0);
        }

        auto src = upload<float>(x0);
        DeviceBuffer<T> narrow(n + off), same(n + off);
        DeviceBuffer<float> wide(n + off);
        cu::cast<T, float>(narrow.get() + off, src->get() + off, n, test_stream());
        cu::cast<float, T>(wide.get() + off, narrow.get() + off, n, test_stream());
        cu::cast<T, T>(same.get() + off, narrow.get() + off, n, test_stream());
        check_close("cast to T", tail(download(narrow), off), tail(x, off), 0.0);  // exact: round to nearest even
        check_close("cast to fp32", tail(download(wide), off), tail(x, off), 0.0);
        check_close("cast T to T", tail(download(same), off), tail(x, off), 0.0);
      });
      auto dx = upload<float>(x0), dy = upload<float>(y0);
      cu::accumulate(dy->get() + off, dx->get() + off, n, test_stream());
      std::vector<float> want = y0;
      for (int64_t i = off; i < n + off; ++i) want[i] = y0[i] + x0[i];
      check_close("accumulate", download(*dy), want, 0.0);
    }
  }
}

TEST_CASE("cuda glu (silu: SwiGLU, gelu_tanh: GeGLU) forward and backward match the reference", "[gpu][glu]") {
  MT_REQUIRE_GPU();
  for (const Activation act : {Activation::silu, Activation::gelu_tanh}) {
    for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{65539}, int64_t{1} << 20}) {
      DYNAMIC_SECTION("glu " << act_label(act) << " n = " << n << (n % 8 != 0 ? " (scalar path)" : "")) {
        const auto g0 = random_floats(n, 3, 3.f), u0 = random_floats(n, 4), dy0 = random_floats(n, 5);
        for_each_dtype([&]<typename T>() {
          INFO(dtype_label<T>);
          const auto g = rounded<T>(g0), u = rounded<T>(u0), dy = rounded<T>(dy0);
          auto d_g = upload<T>(g), d_u = upload<T>(u), d_dy = upload<T>(dy);
          DeviceBuffer<T> y(n), dg(n), du(n);
          cu::glu_forward<T>(y.get(), d_g->get(), d_u->get(), 1, n, n, act, test_stream());
          cu::glu_backward<T>(dg.get(), du.get(), nullptr, d_dy->get(), d_g->get(), d_u->get(), 1, n, n, act,
                              test_stream());
          std::vector<float> y_ref(n), dg_ref(n), du_ref(n);
          cpu().glu_forward(y_ref.data(), g.data(), u.data(), 1, n, n, act);
          cpu().glu_backward(dg_ref.data(), du_ref.data(), nullptr, dy.data(), g.data(), u.data(), 1, n, n, act);
          const auto got_y = download(y), got_dg = download(dg), got_du = download(du);
          check_close("glu y", got_y, y_ref, tolerance<T>);
          check_close("glu dgate", got_dg, dg_ref, tolerance<T>);
          check_close("glu dup", got_du, du_ref, tolerance<T>);
          // The backward's activation output: the forward's bits, and the same gradients.
          DeviceBuffer<T> y_again(n), dg_again(n), du_again(n);
          cu::glu_backward<T>(dg_again.get(), du_again.get(), y_again.get(), d_dy->get(), d_g->get(), d_u->get(), 1, n,
                              n, act, test_stream());
          CHECK(same_bits(download(y_again), got_y));
          CHECK(same_bits(download(dg_again), got_dg));
          CHECK(same_bits(download(du_again), got_du));
          if (act == Activation::gelu_tanh) {  // independently of the CPU reference: torch's formula in fp64
            std::vector<double> y64(n), dg64(n), du64(n);
            for (int64_t i = 0; i < n; ++i) {
              y64[i] = gelu_tanh(g[i]) * u[i];
              dg64[i] = static_cast<double>(dy[i]) * u[i] * gelu_tanh_derivative(g[i]);
              du64[i] = static_cast<double>(dy[i]) * gelu_tanh(g[i]);
            }
            check_close("gelu_tanh y vs fp64", got_y, y64, tolerance<T>);
            check_close("gelu_tanh dgate vs fp64", got_dg, dg64, tolerance<T>);
            check_close("gelu_tanh dup vs fp64", got_du, du64, tolerance<T>);
          }
        });
      }
    }
  }
}

TEST_CASE("cuda glu over one [rows, 2·cols] gate_up buffer matches the reference and the dense op bitwise",
          "[gpu][glu]") {
  MT_REQUIRE_GPU();
  struct Shape {
    int64_t rows, cols;
  };
  // cols 768: Qwen3-30B-A3B's experts (vectors); 7 and 1: the scalar path (a vector would straddle rows).
  for (const Activation act : {Activation::silu, Activation::gelu_tanh}) {
    for (const Shape& c : {Shape{1, 8}, Shape{64, 768}, Shape{37, 7}, Shape{5, 1}, Shape{300, 2880}}) {
      DYNAMIC_SECTION("glu " << act_label(act) << " rows " << c.rows << " cols " << c.cols) {
        const int64_t n = c.rows * c.cols, ld = 2 * c.cols;
        const auto gu0 = random_floats(c.rows * ld, 6, 3.f), dy0 = random_floats(n, 7);
        for_each_dtype([&]<typename T>() {
          INFO(dtype_label<T>);
          const auto gu = rounded<T>(gu0), dy = rounded<T>(dy0);
          std::vector<float> g(n), u(n);  // the halves, dense
          for (int64_t r = 0; r < c.rows; ++r)
            for (int64_t j = 0; j < c.cols; ++j) {
              g[r * c.cols + j] = gu[r * ld + j];
              u[r * c.cols + j] = gu[r * ld + c.cols + j];
            }
          auto d_gu = upload<T>(gu), d_dy = upload<T>(dy), d_g = upload<T>(g), d_u = upload<T>(u);
          DeviceBuffer<T> y(n), y_back(n), d_gate_up(c.rows * ld), y_dense(n), dg(n), du(n);
          const T* gate = d_gu->get();
          cu::glu_forward<T>(y.get(), gate, gate + c.cols, c.rows, c.cols, ld, act, test_stream());
          cu::glu_backward<T>(d_gate_up.get(), d_gate_up.get() + c.cols, y_back.get(), d_dy->get(), gate,
                              gate + c.cols, c.rows, c.cols, ld, act, test_stream());
          cu::glu_forward<T>(y_dense.get(), d_g->get(), d_u->get(), c.rows, c.cols, c.cols, act, test_stream());
          cu::glu_backward<T>(dg.get(), du.get(), nullptr, d_dy->get(), d_g->get(), d_u->get(), c.rows, c.cols, c.cols,
                              act, test_stream());
          std::vector<float> y_ref(n), d_ref(c.rows * ld);
          cpu().glu_forward(y_ref.data(), gu.data(), gu.data() + c.cols, c.rows, c.cols, ld, act);
          cpu().glu_backward(d_ref.data(), d_ref.data() + c.cols, nullptr, dy.data(), gu.data(), gu.data() + c.cols,
                             c.rows, c.cols, ld, act);
          const auto got_y = download(y), got_d = download(d_gate_up);
          check_close("glu gate_up y", got_y, y_ref, tolerance<T>);
          check_close("glu d_gate_up", got_d, d_ref, tolerance<T>);
          CHECK(same_bits(download(y_back), got_y));
          CHECK(same_bits(download(y_dense), got_y));  // each element's expression whatever the layout
          const auto got_dg = download(dg), got_du = download(du);
          std::vector<float> d_dense(got_d.size());
          for (int64_t r = 0; r < c.rows; ++r)
            for (int64_t j = 0; j < c.cols; ++j) {
              d_dense[r * ld + j] = got_dg[r * c.cols + j];
              d_dense[r * ld + c.cols + j] = got_du[r * c.cols + j];
            }
          CHECK(same_bits(d_dense, got_d));
        });
      }
    }
  }
}

TEST_CASE("cuda embedding forward and deterministic backward match the reference", "[gpu][embedding]") {
  MT_REQUIRE_GPU();
  struct Shape {
    int64_t T, V, H;
  };
  for (const Shape c : {Shape{1, 3, 8}, Shape{37, 11, 6}, Shape{600, 50, 256}, Shape{5000, 7, 64},
                        Shape{4096, 1000, 1024}}) {
    INFO("T = " << c.T << ", V = " << c.V << ", H = " << c.H);
    const auto ids = random_ints(c.T, 0, static_cast<int32_t>(c.V - 1), 6);
    const auto table0 = random_floats(c.V * c.H, 7), dy0 = random_floats(c.T * c.H, 8);
    const auto dtable0 = random_floats(c.V * c.H, 9);
    auto d_ids = upload_ints(ids);
    for_each_dtype([&]<typename T>() {
      INFO(dtype_label<T>);
      const auto table = rounded<T>(table0), dy = rounded<T>(dy0);
      auto d_table = upload<T>(table), d_dy = upload<T>(dy);
      DeviceBuffer<T> y(c.T * c.H);
      cu::embedding_forward<T>(y.get(), d_table->get(), d_ids->get(), c.T, c.H, test_stream());
      std::vector<float> y_ref(c.T * c.H), dtable_ref = dtable0;
      cpu().embedding_forward(y_ref.data(), table.data(), ids.data(), c.T, c.H);
      check_close("embedding y", download(y), y_ref, 0.0);

      auto dtable = upload<float>(dtable0), dtable_again = upload<float>(dtable0);
      cu::embedding_backward<T>(dtable->get(), d_dy->get(), d_ids->get(), c.T, c.H, test_stream());
      cu::embedding_backward<T>(dtable_again->get(), d_dy->get(), d_ids->get(), c.T, c.H, test_stream());
      cpu().embedding_backward(dtable_ref.data(), dy.data(), ids.data(), c.T, c.H);
      const auto got = download(*dtable);
      check_close("embedding dtable", got, dtable_ref, 1e-6);
      CHECK(same_bits(got, download(*dtable_again)));
    });
  }
}

TEST_CASE("cuda rmsnorm forward and backward (weight offset 0: Llama, 1: Gemma; with a residual) match the reference",
          "[gpu][rmsnorm]") {
  MT_REQUIRE_GPU();
  struct Shape {
    int64_t N, D;
  };
  const float eps = 1e-6f;
  for (const float offset : {0.f, 1.f}) {
    for (const Shape c : {Shape{1, 6}, Shape{7, 128}, Shape{300, 2048}, Shape{1000, 100}, Shape{64, 8192}}) {
      DYNAMIC_SECTION("rmsnorm weight_offset " << offset << " N = " << c.N << " D = " << c.D
                                               << (c.D % 8 != 0 ? " (scalar path)" : "")) {
        const auto x0 = random_floats(c.N * c.D, 10, 2.f), w0 = random_floats(c.D, 11);
        const auto dy0 = random_floats(c.N * c.D, 12), dw0 = random_floats(c.D, 13);
        for_each_dtype([&]<typename T>() {
          INFO(dtype_label<T>);
          const auto x = rounded<T>(x0), w = rounded<T>(w0), dy = rounded<T>(dy0);
          auto d_x = upload<T>(x), d_w = upload<T>(w), d_dy = upload<T>(dy);
          auto dw = upload<float>(dw0), dw_again = upload<float>(dw0);
          DeviceBuffer<T> y(c.N * c.D), dx(c.N * c.D), dx_again(c.N * c.D);
          cu::rmsnorm_forward<T>(y.get(), d_x->get(), d_w->get(), c.N, c.D, eps, offset, test_stream());
          cu::rmsnorm_backward<T>(dx.get(), dw->get(), d_dy->get(), d_x->get(), d_w->get(), nullptr, c.N, c.D, eps,
                                  offset, test_stream());
          cu::rmsnorm_backward<T>(dx_again.get(), dw_again->get(), d_dy->get(), d_x->get(), d_w->get(), nullptr, c.N,
                                  c.D, eps, offset, test_stream());
          std::vector<float> y_ref(c.N * c.D), dx_ref(c.N * c.D), dw_ref = dw0;
          cpu().rmsnorm_forward(y_ref.data(), x.data(), w.data(), c.N, c.D, eps, offset);
          cpu().rmsnorm_backward(dx_ref.data(), dw_ref.data(), dy.data(), x.data(), w.data(), c.N, c.D, eps, offset);
          check_close("rmsnorm y", download(y), y_ref, tolerance<T>);
          const auto got_dx = download(dx), got_dw = download(*dw);
          check_close("rmsnorm dx", got_dx, dx_ref, tolerance<T>);
          check_close("rmsnorm dw", got_dw, dw_ref, tolerance<T>);
          CHECK(same_bits(got_dx, download(dx_again)));
          CHECK(same_bits(got_dw, download(*dw_again)));

          // With a residual the fused pass gives the bits of rmsnorm_backward followed by add, and dw is unchanged.
          const auto r = rounded<T>(random_floats(c.N * c.D, 14));
          auto d_r = upload<T>(r), dw_fused = upload<float>(dw0);
          DeviceBuffer<T> dx_fused(c.N * c.D);
          cu::rmsnorm_backward<T>(dx_fused.get(), dw_fused->get(), d_dy->get(), d_x->get(), d_w->get(), d_r->get(), c.N,
                                  c.D, eps, offset, test_stream());
          cu::add<T>(dx.get(), d_r->get(), c.N * c.D, test_stream());
          CHECK(same_bits(download(dx_fused), download(dx)));
          CHECK(same_bits(download(*dw_fused), got_dw));
        });
      }
    }
  }
}

TEST_CASE("cuda normalize_rows (F.normalize, Baichuan 2's LM head) forward and backward match the reference",
          "[gpu][normalize_rows]") {
  MT_REQUIRE_GPU();
  struct Row {
    const char* name;
    int64_t N, D;
    bool zero_row;  // row 0 all zeros: y = 0, and the clamped norm gives dx += dy / 1e-12
  };
  const std::vector<Row> rows = {
      {"one element", 1, 1, false},
      {"odd D 7 (scalar path)", 3, 7, false},
      {"D 100, not a multiple of the 16-byte pack (scalar path)", 1000, 100, false},
      {"D 4096 (vector path)", 50, 4096, false},
      {"Baichuan 2 13B head rows: D 5120", 2048, 5120, false},
      {"a zero row (the 1e-12 clamp) among D 5120 rows", 5, 5120, true},
  };
  for (const Row& c : rows) {
    DYNAMIC_SECTION("normalize_rows " << c.name << ": N = " << c.N << " D = " << c.D) {
      auto x0 = random_floats(c.N * c.D, 60, 0.02f);  // weight-like magnitudes
      if (c.zero_row) std::fill_n(x0.begin(), c.D, 0.f);
      const auto dy = random_floats(c.N * c.D, 61), dx0 = random_floats(c.N * c.D, 62);
      auto d_dy = upload<float>(dy);
      for_each_dtype([&]<typename T>() {
        INFO(dtype_label<T>);
        const auto x = rounded<T>(x0);
        auto d_x = upload<T>(x), dx = upload<float>(dx0), dx_again = upload<float>(dx0);
        DeviceBuffer<T> y(c.N * c.D);
        cu::normalize_rows_forward<T>(y.get(), d_x->get(), c.N, c.D, test_stream());
        cu::normalize_rows_backward<T>(dx->get(), d_dy->get(), d_x->get(), c.N, c.D, test_stream());
        cu::normalize_rows_backward<T>(dx_again->get(), d_dy->get(), d_x->get(), c.N, c.D, test_stream());
        std::vector<float> y_ref(c.N * c.D), dx_ref = dx0;
        cpu().normalize_rows_forward(y_ref.data(), x.data(), c.N, c.D);
        cpu().normalize_rows_backward(dx_ref.data(), dy.data(), x.data(), c.N, c.D);
        const auto got_y = download(y), got_dx = download(*dx);
        // fp64 reference of the forward, independently of the CPU reference.
        std::vector<double> y64(c.N * c.D);
        for (int64_t r = 0; r < c.N; ++r) {
          double ss = 0.0;
          for (int64_t d = 0; d < c.D; ++d) ss += static_cast<double>(x[r * c.D + d]) * x[r * c.D + d];
          const double n = std::max(std::sqrt(ss), 1e-12);
          for (int64_t d = 0; d < c.D; ++d) y64[r * c.D + d] = x[r * c.D + d] / n;
        }
        check_close("normalize_rows y", got_y, y_ref, tolerance<T>);
        check_close("normalize_rows y vs fp64", got_y, y64, tolerance<T>);
        // dx in fp32 from T inputs: fp32 accuracy for both dtypes. A zero row's dx (about 1e12·dy) is checked apart,
        // or it would swamp the norm of the rest.
        const int64_t r0 = c.zero_row ? 1 : 0;
        check_close("normalize_rows dx", rows_of(got_dx, r0, c.N, c.D), rows_of(dx_ref, r0, c.N, c.D), 1e-5);
        if (c.zero_row) {
          CHECK(all_zero(rows_of(got_y, 0, 1, c.D)));
          std::vector<double> zero_dx(c.D);
          for (int64_t d = 0; d < c.D; ++d) zero_dx[d] = static_cast<double>(dx0[d]) + dy[d] / 1e-12;
          check_close("normalize_rows dx of the zero row (dy / 1e-12)", rows_of(got_dx, 0, 1, c.D), zero_dx, 1e-6);
          check_close("normalize_rows dx of the zero row vs the reference", rows_of(got_dx, 0, 1, c.D),
                      rows_of(dx_ref, 0, 1, c.D), 1e-6);
        }
        CHECK(same_bits(got_dx, download(*dx_again)));
      });
    }
  }
}

TEST_CASE("cuda rope forward and backward (rotate_half and GLM's interleaved pairs) match the reference",
          "[gpu][rope]") {
  MT_REQUIRE_GPU();
  struct Shape {
    const char* name;
    int64_t T, heads, head_dim, rot_dim, max_pos;
  };
  const std::vector<Shape> shapes = {
      {"tiny, full rotation", 5, 2, 8, 8, 16},
      {"head_dim 6 rot_dim 4 (scalar path)", 33, 3, 6, 4, 40},
      {"head_dim 128 full rotation", 100, 4, 128, 128, 128},
      {"head_dim 128 rot_dim 64 (GLM-4's partial_rotary_factor 0.5)", 64, 2, 128, 64, 100},
      {"head_dim 64 rot_dim 32 (partial)", 50, 3, 64, 32, 60},
      {"head_dim 96 rot_dim 24 (partial, half 12 not a multiple of the pack: scalar path)", 40, 2, 96, 24, 64},
  };
  for (const bool interleaved : {false, true}) {
    for (const Shape& c : shapes) {
      DYNAMIC_SECTION("rope " << (interleaved ? "interleaved " : "rotate_half ") << c.name << ": T = " << c.T
                              << " heads = " << c.heads << " head_dim = " << c.head_dim << " rot_dim = " << c.rot_dim) {
        const int64_t n = c.T * c.heads * c.head_dim;
        std::vector<float> cos, sin;
        rope_tables(c.max_pos, c.rot_dim, cos, sin);
        const auto positions = random_ints(c.T, 0, static_cast<int32_t>(c.max_pos - 1), 14);
        const auto x0 = random_floats(n, 15);
        auto d_cos = upload<float>(cos), d_sin = upload<float>(sin);
        auto d_pos = upload_ints(positions);
        for_each_dtype([&]<typename T>() {
          INFO(dtype_label<T>);
          const auto x = rounded<T>(x0);
          auto fwd = upload<T>(x), bwd = upload<T>(x);
          cu::rope_forward<T>(fwd->get(), d_cos->get(), d_sin->get(), d_pos->get(), c.T, c.heads, c.head_dim,
                              c.rot_dim, interleaved, test_stream());
          cu::rope_backward<T>(bwd->get(), d_cos->get(), d_sin->get(), d_pos->get(), c.T, c.heads, c.head_dim,
                               c.rot_dim, interleaved, test_stream());
          auto fwd_ref = x, bwd_ref = x;
          cpu().rope_forward(fwd_ref.data(), cos.data(), sin.data(), positions.data(), c.T, c.heads, c.head_dim,
                             c.rot_dim, interleaved);
          cpu().rope_backward(bwd_ref.data(), cos.data(), sin.data(), positions.data(), c.T, c.heads, c.head_dim,
                              c.rot_dim, interleaved);
          const auto got_fwd = download(*fwd);
          check_close("rope forward", got_fwd, fwd_ref, tolerance<T>);
          check_close("rope backward", download(*bwd), bwd_ref, tolerance<T>);
          // Dims rot_dim.. pass through bit for bit.
          int64_t changed = 0;
          for (int64_t r = 0; r < c.T * c.heads; ++r) {
            for (int64_t d = c.rot_dim; d < c.head_dim; ++d) changed += got_fwd[r * c.head_dim + d] != x[r * c.head_dim + d];
          }
          CHECK(changed == 0);
        });
      }
    }
  }
}

TEST_CASE("cuda bias forward and deterministic backward match the reference", "[gpu][bias]") {
  MT_REQUIRE_GPU();
  struct Shape {
    int64_t T, O;
  };
  for (const Shape c : {Shape{1, 3}, Shape{37, 7}, Shape{100, 256}, Shape{4096, 520}, Shape{3, 11008}}) {
    INFO("T = " << c.T << ", O = " << c.O);
    const auto y0 = random_floats(c.T * c.O, 16), b0 = random_floats(c.O, 17), dy0 = random_floats(c.T * c.O, 18);
    const auto db0 = random_floats(c.O, 19);
    for_each_dtype([&]<typename T>() {
      INFO(dtype_label<T>);
      const auto y = rounded<T>(y0), b = rounded<T>(b0), dy = rounded<T>(dy0);
      auto d_y = upload<T>(y), d_b = upload<T>(b), d_dy = upload<T>(dy);
      auto db = upload<float>(db0), db_again = upload<float>(db0);
      cu::bias_forward<T>(d_y->get(), d_b->get(), c.T, c.O, test_stream());
      cu::bias_backward<T>(db->get(), d_dy->get(), c.T, c.O, 1.0f, test_stream());
      cu::bias_backward<T>(db_again->get(), d_dy->get(), c.T, c.O, 1.0f, test_stream());
      std::vector<float> y_ref = y, db_ref = db0;
      for (int64_t o = 0; o < c.O; ++o) {
        double sum = 0.0;
        for (int64_t t = 0; t < c.T; ++t) {
          y_ref[t * c.O + o] += b[o];
          sum += dy[t * c.O + o];
        }
        db_ref[o] += static_cast<float>(sum);
      }
      check_close("bias y", download(*d_y), y_ref, tolerance<T>);
      const auto got_db = download(*db);
      check_close("bias db", got_db, db_ref, 1e-6);
      CHECK(same_bits(got_db, download(*db_again)));
    });
  }
}

namespace {

struct AttnCase {
  const char* name;
  int64_t batch, seq, heads, kv_heads, head_dim, window;
  std::vector<int32_t> seq_lens;  // empty: all valid
  bool segmented;
  float scale = 0.f;    // AttnShape::scale (0: 1/sqrt(head_dim))
  float softcap = 0.f;  // AttnShape::softcap (0: none)
  bool alibi = false;   // slopes from alibi_slopes(heads)
  float magnitude = 1.f;  // std of the random q and k (larger: logits reach the soft-cap's non-linear range)
};

// Packed-example ids: runs of random length, distinct per sequence.
std::vector<int32_t> make_segments(int64_t batch, int64_t seq, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> seg(static_cast<size_t>(batch * seq));
  for (int64_t b = 0; b < batch; ++b) {
    int32_t id = static_cast<int32_t>(100 * b);
    for (int64_t i = 0; i < seq; ++i) {
      if (i > 0 && rng() % 23 == 0) ++id;
      seg[b * seq + i] = id;
    }
  }
  return seg;
}

// Elements of rows at padded positions (i >= seq_lens[b]) that are not exactly zero; row_width elements per token.
int64_t nonzero_padding(const std::vector<float>& v, const AttnCase& c, int64_t row_width) {
  int64_t bad = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t len = c.seq_lens.empty() ? c.seq : c.seq_lens[b];
    for (int64_t i = len; i < c.seq; ++i) {
      for (int64_t e = 0; e < row_width; ++e) bad += v[(b * c.seq + i) * row_width + e] != 0.f;
    }
  }
  return bad;
}

// The table: the plain rows (the main fast path: any scale, no soft-cap, no ALiBi), then the soft-capped (Gemma 2),
// ALiBi (Baichuan 2: 40 heads, not a power of two) and custom-scale rows, each with GQA / window / segments /
// padding and head_dim 64 / 128 / 256, then the combinations.
const std::vector<AttnCase>& attention_cases() {
  static const std::vector<AttnCase> cases = {
      {"plain causal, head_dim 16", 1, 17, 2, 2, 16, 0, {}, false},
      {"plain GQA 2, padding, head_dim 64", 2, 130, 4, 2, 64, 0, {130, 77}, false},
      {"plain sliding window 100, MQA, head_dim 128", 1, 600, 2, 1, 128, 100, {}, false},
      {"plain tiny head_dim 6, segments, padding", 2, 130, 2, 1, 6, 0, {130, 50}, true},
      {"plain an empty sequence and one of length 1", 3, 2, 1, 1, 64, 0, {2, 0, 1}, false},
      {"plain long, padded, GQA 2, head_dim 128", 1, 600, 4, 2, 128, 0, {517}, false},
      {"plain window 37, GQA 4, segments, padding, head_dim 64", 2, 130, 8, 2, 64, 37, {130, 100}, true},
      {"plain everything at once, small", 2, 17, 3, 1, 16, 5, {17, 9}, true},
      {"plain head_dim 200 in bucket 256 (column-split backward)", 1, 70, 2, 2, 200, 0, {}, false},
      {"plain head_dim 96 in bucket 128", 2, 96, 4, 4, 96, 0, {96, 95}, false},
      {"plain GQA 8 split in part over blocks (132 SMs: 4 of 8)", 4, 1024, 16, 2, 64, 0, {1024, 1000, 999, 512}, false},
      {"plain long odd 8191, GQA 2, padding 8191/5003, head_dim 64", 2, 8191, 2, 1, 64, 0, {8191, 5003}, false},
      {"plain long 16384, window 4096, segments, head_dim 128", 1, 16384, 2, 1, 128, 4096, {}, true},

      {"softcap 50 (Gemma 2 attention), GQA 2, window 100, padding, head_dim 256, q/k std 3", 2, 300, 8, 4, 256, 100,
       {300, 211}, false, 0.f, 50.f, false, 3.f},
      {"softcap 50 with scale 1/12 (Gemma 2 27B: query_pre_attn_scalar 144), GQA 2, segments, padding, head_dim 128",
       2, 200, 4, 2, 128, 0, {200, 150}, true, 1.f / 12.f, 50.f, false, 4.f},
      {"softcap 1 (saturating), MQA, window 37, segments, padding, head_dim 64", 2, 130, 4, 1, 64, 37, {130, 100},
       true, 0.f, 1.f},
      {"softcap 2.5, GQA 8 split over blocks, padding, head_dim 64", 2, 512, 16, 2, 64, 0, {512, 300}, false, 0.f,
       2.5f},
      {"softcap 3, tiny head_dim 6 (element loads), segments, padding", 2, 130, 2, 1, 6, 0, {130, 50}, true, 0.f, 3.f},

      {"alibi 40 heads (MHA, Baichuan 2 13B), head_dim 128", 1, 257, 40, 40, 128, 0, {}, false, 0.f, 0.f, true},
      {"alibi 40 heads, GQA 5, segments, padding, head_dim 64", 2, 150, 40, 8, 64, 0, {150, 97}, true, 0.f, 0.f, true},
      {"alibi 40 heads, GQA 2, window 64, head_dim 256", 1, 200, 40, 20, 256, 64, {}, false, 0.f, 0.f, true},
      {"alibi 40 heads, head_dim 200 in bucket 256, padding", 2, 70, 40, 40, 200, 0, {70, 41}, false, 0.f, 0.f, true},

      {"scale 0.5 (sharper than 1/sqrt(64)), GQA 4, window 37, segments, padding, head_dim 64", 2, 130, 8, 2, 64, 37,
       {130, 100}, true, 0.5f},
      {"scale 1/16 on head_dim 128 (query_pre_attn_scalar 256), MQA, window 100", 1, 600, 2, 1, 128, 100, {}, false,
       1.f / 16.f},
      {"scale 0.02 (flat), GQA 2, padding, head_dim 256", 2, 70, 4, 2, 256, 0, {70, 33}, false, 0.02f},

      {"softcap 2.5 + alibi 6 heads + scale 0.2, GQA 3, window 50, segments, padding, head_dim 64", 2, 130, 6, 2, 64,
       50, {130, 77}, true, 0.2f, 2.5f, true},
      {"softcap 5 + alibi 40 heads, GQA 5, padding, head_dim 128", 1, 200, 40, 8, 128, 0, {181}, false, 0.f, 5.f,
       true, 2.f},
  };
  return cases;
}

}  // namespace

TEST_CASE("cuda attention forward and deterministic backward match the reference", "[gpu][attention]") {
  MT_REQUIRE_GPU();
  for (const AttnCase& c : attention_cases()) {
    DYNAMIC_SECTION("attention " << c.name << ": batch " << c.batch << " seq " << c.seq << " heads " << c.heads << "/"
                                 << c.kv_heads << " head_dim " << c.head_dim << " window " << c.window) {
      const int64_t T = c.batch * c.seq, q_size = T * c.heads * c.head_dim, kv_size = T * c.kv_heads * c.head_dim;
      const int64_t lse_size = c.batch * c.heads * c.seq;
      const auto segments = c.segmented ? make_segments(c.batch, c.seq, 20) : std::vector<int32_t>{};
      const auto slopes = c.alibi ? alibi_slopes(c.heads) : std::vector<float>{};
      mt::AttnShape host{.batch = c.batch, .seq = c.seq, .n_heads = c.heads, .n_kv_heads = c.kv_heads,
                         .head_dim = c.head_dim, .window = c.window, .scale = c.scale, .softcap = c.softcap};
      host.alibi_slopes = slopes.empty() ? nullptr : slopes.data();
      host.seq_lens = c.seq_lens.empty() ? nullptr : c.seq_lens.data();
      host.segments = segments.empty() ? nullptr : segments.data();
      auto d_lens = upload_ints(c.seq_lens.empty() ? std::vector<int32_t>{0} : c.seq_lens);
      auto d_segments = upload_ints(segments.empty() ? std::vector<int32_t>{0} : segments);
      auto d_slopes = upload<float>(slopes.empty() ? std::vector<float>{0.f} : slopes);
      mt::AttnShape dev = host;
      dev.alibi_slopes = host.alibi_slopes != nullptr ? d_slopes->get() : nullptr;
      dev.seq_lens = host.seq_lens != nullptr ? d_lens->get() : nullptr;
      dev.segments = host.segments != nullptr ? d_segments->get() : nullptr;

      const auto q0 = random_floats(q_size, 21, c.magnitude), k0 = random_floats(kv_size, 22, c.magnitude);
      const auto v0 = random_floats(kv_size, 23), dout0 = random_floats(q_size, 24);
      for_each_dtype([&]<typename T>() {
        INFO(dtype_label<T>);
        const auto q = rounded<T>(q0), k = rounded<T>(k0), v = rounded<T>(v0), dout = rounded<T>(dout0);
        std::vector<float> out_ref(q_size), lse_ref(lse_size), dq_ref(q_size), dk_ref(kv_size), dv_ref(kv_size);
        cpu().attention_forward(out_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), host);
        cpu().attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), dout.data(), q.data(), k.data(),
                                 v.data(), out_ref.data(), lse_ref.data(), host);

        auto d_q = upload<T>(q), d_k = upload<T>(k), d_v = upload<T>(v), d_dout = upload<T>(dout);
        DeviceBuffer<T> out(q_size), dq(q_size), dk(kv_size), dv(kv_size), dq2(q_size), dk2(kv_size), dv2(kv_size);
        DeviceBuffer<float> lse(lse_size);
        cu::attention_forward<T>(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), dev, test_stream());
        cu::attention_backward<T>(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                                  out.get(), lse.get(), dev, test_stream());
        cu::attention_backward<T>(dq2.get(), dk2.get(), dv2.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                                  out.get(), lse.get(), dev, test_stream());
        const auto got_out = download(out), got_dq = download(dq), got_dk = download(dk), got_dv = download(dv);
        check_close("attention out", got_out, out_ref, tolerance<T>);
        check_close("attention lse", download(lse), lse_ref, 1e-5);
        check_close("attention dq", got_dq, dq_ref, tolerance<T>);
        check_close("attention dk", got_dk, dk_ref, tolerance<T>);
        check_close("attention dv", got_dv, dv_ref, tolerance<T>);
        CHECK(nonzero_padding(got_out, c, c.heads * c.head_dim) == 0);
        CHECK(nonzero_padding(got_dq, c, c.heads * c.head_dim) == 0);
        CHECK(nonzero_padding(got_dk, c, c.kv_heads * c.head_dim) == 0);
        CHECK(nonzero_padding(got_dv, c, c.kv_heads * c.head_dim) == 0);
        CHECK(same_bits(got_dq, download(dq2)));
        CHECK(same_bits(got_dk, download(dk2)));
        CHECK(same_bits(got_dv, download(dv2)));
      });
    }
  }
}

TEST_CASE("cuda attention: scale given as 1/sqrt(head_dim) is bit for bit the default (scale 0)",
          "[gpu][attention]") {
  MT_REQUIRE_GPU();
  const AttnCase c{"GQA 4, window 37, segments, padding, head_dim 64", 2, 130, 8, 2, 64, 37, {130, 100}, true};
  const int64_t T = c.batch * c.seq, q_size = T * c.heads * c.head_dim, kv_size = T * c.kv_heads * c.head_dim;
  const auto segments = make_segments(c.batch, c.seq, 20);
  auto d_lens = upload_ints(c.seq_lens);
  auto d_segments = upload_ints(segments);
  mt::AttnShape shape{.batch = c.batch, .seq = c.seq, .n_heads = c.heads, .n_kv_heads = c.kv_heads,
                      .head_dim = c.head_dim, .window = c.window};
  shape.seq_lens = d_lens->get();
  shape.segments = d_segments->get();
  mt::AttnShape explicit_scale = shape;
  explicit_scale.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  for_each_dtype([&]<typename T>() {
    INFO(dtype_label<T>);
    auto d_q = upload<T>(rounded<T>(random_floats(q_size, 21))), d_k = upload<T>(rounded<T>(random_floats(kv_size, 22)));
    auto d_v = upload<T>(rounded<T>(random_floats(kv_size, 23))), d_dout = upload<T>(rounded<T>(random_floats(q_size, 24)));
    std::vector<std::vector<float>> got[2];
    for (int run = 0; run < 2; ++run) {
      const mt::AttnShape& s = run == 0 ? shape : explicit_scale;
      DeviceBuffer<T> out(q_size), dq(q_size), dk(kv_size), dv(kv_size);
      DeviceBuffer<float> lse(c.batch * c.heads * c.seq);
      cu::attention_forward<T>(out.get(), lse.get(), d_q->get(), d_k->get(), d_v->get(), s, test_stream());
      cu::attention_backward<T>(dq.get(), dk.get(), dv.get(), d_dout->get(), d_q->get(), d_k->get(), d_v->get(),
                                out.get(), lse.get(), s, test_stream());
      got[run] = {download(out), download(lse), download(dq), download(dk), download(dv)};
    }
    for (size_t i = 0; i < got[0].size(); ++i) CHECK(same_bits(got[0][i], got[1][i]));
  });
}

TEST_CASE("cuda cross_entropy (optionally soft-capped) matches an fp64 softmax, in place too", "[gpu][cross_entropy]") {
  MT_REQUIRE_GPU();
  struct Shape {
    int64_t rows, V, ld = 0;  // ld: elements from row to row (0: V); the columns past V hold NaN and must stay so
  };
  const float scale = 0.37f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const float softcap : {0.f, 30.f, 5.f}) {  // none; Gemma 2's final_logit_softcapping; strongly non-linear
    for (const Shape c : {Shape{1, 5}, Shape{3, 4}, Shape{7, 1001}, Shape{64, 32000}, Shape{4, 151936},
                          Shape{3, 5, 64}, Shape{7, 1001, 1024}, Shape{2, 128167, 128192}}) {
      const int64_t ld = c.ld > 0 ? c.ld : c.V;
      DYNAMIC_SECTION("cross_entropy softcap " << softcap << " rows = " << c.rows << " V = " << c.V << " ld = " << ld
                                               << (ld % 4 != 0 ? " (scalar path)" : "")) {
        const auto packed = random_floats(c.rows * c.V, 25, softcap > 0.f ? 12.f : 4.f);
        std::vector<float> logits(c.rows * ld, nan);
        for (int64_t r = 0; r < c.rows; ++r)
          std::copy_n(packed.begin() + r * c.V, c.V, logits.begin() + r * ld);
        auto targets = random_ints(c.rows, 0, static_cast<int32_t>(c.V - 1), 26);
        for (int64_t r = 1; r < c.rows; r += 3) targets[r] = -100;
        std::vector<float> loss_ref(c.rows, 0.f), grad_ref(c.rows * ld, nan);
        for (int64_t r = 0; r < c.rows; ++r) {
          for (int64_t j = 0; j < c.V; ++j) grad_ref[r * ld + j] = 0.f;
          if (targets[r] == -100) continue;
          std::vector<double> z(c.V), chain(c.V, 1.0);
          for (int64_t j = 0; j < c.V; ++j) {
            const double x = logits[r * ld + j];
            if (softcap > 0.f) {
              const double t = std::tanh(x / softcap);
              z[j] = softcap * t;
              chain[j] = 1.0 - t * t;
            } else {
              z[j] = x;
            }
          }
          double m = z[0], sum = 0.0;
          for (int64_t j = 0; j < c.V; ++j) m = std::max(m, z[j]);
          for (int64_t j = 0; j < c.V; ++j) sum += std::exp(z[j] - m);
          const double lse = m + std::log(sum);
          loss_ref[r] = static_cast<float>(lse - z[targets[r]]);
          for (int64_t j = 0; j < c.V; ++j) {
            grad_ref[r * ld + j] =
                static_cast<float>(scale * (std::exp(z[j] - lse) - (j == targets[r] ? 1.0 : 0.0)) * chain[j]);
          }
        }
        // The padding columns: NaN in, NaN out (check_close compares NaN with NaN as equal only bit for bit).
        const auto padding_untouched = [&](const std::vector<float>& got) {
          bool untouched = true;
          for (int64_t r = 0; r < c.rows; ++r)
            for (int64_t j = c.V; j < ld; ++j) untouched = untouched && std::isnan(got[r * ld + j]);
          return untouched;
        };
        const auto valid = [&](const std::vector<float>& a) {
          std::vector<float> out;
          for (int64_t r = 0; r < c.rows; ++r) out.insert(out.end(), a.begin() + r * ld, a.begin() + r * ld + c.V);
          return out;
        };
        auto d_targets = upload_ints(targets);
        for_each_dtype([&]<typename T>() {
          INFO(dtype_label<T>);
          auto d_logits = upload<float>(logits);
          auto d_dlogits = upload<T>(std::vector<float>(c.rows * ld, nan));
          DeviceBuffer<float> loss(c.rows);
          cu::cross_entropy<T>(d_dlogits->get(), loss.get(), d_logits->get(), d_targets->get(), nullptr, c.rows, c.V, ld,
                               scale, softcap, test_stream());
          const auto got_grad = download(*d_dlogits), got_loss = download(loss);
          check_close("cross_entropy row_loss", got_loss, loss_ref, 1e-5);
          check_close("cross_entropy dlogits", valid(got_grad), valid(grad_ref), tolerance<T>);
          CHECK(padding_untouched(got_grad));
          if constexpr (is_f32<T>) {
            DeviceBuffer<float> loss_in_place(c.rows);
            cu::cross_entropy<float>(d_logits->get(), loss_in_place.get(), d_logits->get(), d_targets->get(), nullptr,
                                     c.rows, c.V, ld, scale, softcap, test_stream());
            CHECK(same_bits(valid(download(*d_logits)), valid(got_grad)));
            CHECK(padding_untouched(download(*d_logits)));
            CHECK(same_bits(download(loss_in_place), got_loss));
          }
        });
      }
    }
  }
}

TEST_CASE("cuda cross_entropy marks out-of-range targets with NaN", "[gpu][cross_entropy]") {
  MT_REQUIRE_GPU();
  for (const float softcap : {0.f, 30.f}) {
    INFO("softcap " << softcap);
    auto d_logits = upload<float>(random_floats(2 * 8, 27));
    auto d_targets = upload_ints({8, -100});
    DeviceBuffer<float> dlogits(2 * 8), loss(2);
    cu::cross_entropy<float>(dlogits.get(), loss.get(), d_logits->get(), d_targets->get(), nullptr, 2, 8, 8, 1.f, softcap,
                             test_stream());
    const auto got = download(loss);
    CHECK(std::isnan(got[0]));
    CHECK(got[1] == 0.f);
  }
}

TEST_CASE("cuda sum_squares and sum are exact in fp64 and deterministic", "[gpu][reduce]") {
  MT_REQUIRE_GPU();
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, (int64_t{1} << 22) + 3}) {
    for (const int64_t off : {int64_t{0}, int64_t{1}}) {
      INFO("n = " << n << ", offset " << off);
      const auto x = random_floats(n + off, 28);
      double ss = 0.0, s = 0.0, abs_s = 0.0;
      for (int64_t i = off; i < n + off; ++i) {
        ss += static_cast<double>(x[i]) * x[i];
        s += x[i];
        abs_s += std::abs(x[i]);
      }
      auto d_x = upload<float>(x);
      DeviceBuffer<double> out(4);
      cu::sum_squares(out.get(), d_x->get() + off, n, test_stream());
      cu::sum_squares(out.get() + 1, d_x->get() + off, n, test_stream());
      cu::sum(out.get() + 2, d_x->get() + off, n, test_stream());
      cu::sum(out.get() + 3, d_x->get() + off, n, test_stream());
      const auto got = out.read<double>();
      CHECK(std::abs(got[0] - ss) <= 1e-12 * ss);
      CHECK(std::abs(got[2] - s) <= 1e-12 * abs_s);
      CHECK(got[0] == got[1]);
      CHECK(got[2] == got[3]);
    }
  }
}

// ---- Through the Backend interface: make_cuda_backend(dtype) against make_cpu_backend(), for the ops that live in
// cuda_backend.cu (cuBLASLt GEMMs, the chunked LM head) and the dispatch of every new op.

namespace {

const char* dtype_label_of(DType dt) { return dt == DType::f32 ? "float32" : "bfloat16"; }

}  // namespace

TEST_CASE("cuda backend linear_forward(_add) / linear_backward (cuBLASLt GEMM, bias, residual) match the CPU backend",
          "[gpu][linear][backend]") {
  MT_REQUIRE_GPU();
  struct Row {
    const char* name;
    int64_t T, I, O;
    bool bias;
  };
  const std::vector<Row> rows = {
      {"1×1×1 with bias", 1, 1, 1, true},
      {"odd T 7 I 13 O 5, no bias", 7, 13, 5, false},
      {"T 300 I 1000 O 37 with bias (Qwen-style qkv bias)", 300, 1000, 37, true},
      {"T 512 I 2048 O 1024, no bias (MLP-like)", 512, 2048, 1024, false},
      {"T 33 I 4096 O 96 with bias (long reduction)", 33, 4096, 96, true},
  };
  for (const Row& c : rows) {
    DYNAMIC_SECTION("linear " << c.name) {
      const auto x0 = random_floats(c.T * c.I, 40), w0 = random_floats(c.O * c.I, 41, 0.05f);
      const auto b0 = random_floats(c.O, 42), dy0 = random_floats(c.T * c.O, 43);
      const auto dx0 = random_floats(c.T * c.I, 44), dw0 = random_floats(c.O * c.I, 45), db0 = random_floats(c.O, 46);
      for (const DType dt : {DType::f32, DType::bf16}) {
        INFO(dtype_label_of(dt));
        auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
        const double tol = tolerance_of(dt);
        const auto x = rounded_to(dt, x0), w = rounded_to(dt, w0), b = rounded_to(dt, b0), dy = rounded_to(dt, dy0);
        const auto dx_init = rounded_to(dt, dx0);
        BackendBuffer d_x(*be, x, dt), d_w(*be, w, dt), d_b(*be, b, dt), d_dy(*be, dy, dt);
        BackendBuffer y(*be, c.T * c.O, dt), dx(*be, c.T * c.I, dt), dx_acc(*be, dx_init, dt);
        BackendBuffer dw(*be, dw0, DType::f32), db(*be, db0, DType::f32), dw_only(*be, dw0, DType::f32);
        be->linear_forward(y.get(), d_x.get(), d_w.get(), c.bias ? d_b.get() : nullptr, c.T, c.I, c.O);
        be->linear_backward(dx.get(), dw.floats(), c.bias ? db.floats() : nullptr, d_dy.get(), d_x.get(), d_w.get(),
                            c.T, c.I, c.O, false, 1.0f);
        be->linear_backward(dx_acc.get(), dw_only.floats(), nullptr, d_dy.get(), d_x.get(), d_w.get(), c.T, c.I, c.O,
                            true, 1.0f);

        std::vector<float> y_ref(c.T * c.O), dx_ref(c.T * c.I), dx_acc_ref = dx_init, dw_ref = dw0, db_ref = db0;
        std::vector<float> dw_only_ref = dw0;
        cpu().linear_forward(y_ref.data(), x.data(), w.data(), c.bias ? b.data() : nullptr, c.T, c.I, c.O);
        cpu().linear_backward(dx_ref.data(), dw_ref.data(), c.bias ? db_ref.data() : nullptr, dy.data(), x.data(),
                              w.data(), c.T, c.I, c.O, false, 1.0f);
        cpu().linear_backward(dx_acc_ref.data(), dw_only_ref.data(), nullptr, dy.data(), x.data(), w.data(), c.T, c.I,
                              c.O, true, 1.0f);
        check_close("linear y", y.read(), y_ref, tol);
        check_close("linear dx (=)", dx.read(), dx_ref, tol);
        check_close("linear dx (+=, accumulate_dx)", dx_acc.read(), dx_acc_ref, tol);
        check_close("linear dw (+=)", dw.read(), dw_ref, tol);
        check_close("linear dw (+=) of the accumulating call", dw_only.read(), dw_only_ref, tol);
        if (c.bias) check_close("linear db (+=)", db.read(), db_ref, tol);

        // dx may be null: only dw accumulates.
        BackendBuffer dw_no_dx(*be, dw0, DType::f32);
        be->linear_backward(nullptr, dw_no_dx.floats(), nullptr, d_dy.get(), d_x.get(), d_w.get(), c.T, c.I, c.O,
                            false, 1.0f);
        check_close("linear dw with dx null", dw_no_dx.read(), dw_only_ref, tol);

        // The residual in the GEMM's epilogue (without a bias) or after the bias.
        const auto r = rounded_to(dt, random_floats(c.T * c.O, 47));
        BackendBuffer d_r(*be, r, dt), y_add(*be, c.T * c.O, dt);
        be->linear_forward_add(y_add.get(), d_x.get(), d_w.get(), c.bias ? d_b.get() : nullptr, d_r.get(), c.T, c.I,
                               c.O, 1.0f);
        std::vector<float> y_add_ref(c.T * c.O);
        cpu().linear_forward_add(y_add_ref.data(), x.data(), w.data(), c.bias ? b.data() : nullptr, r.data(), c.T, c.I,
                                 c.O, 1.0f);
        check_close("linear y + residual", y_add.read(), y_add_ref, tol);

        // Granite's residual multiplier: the GEMM's alpha (or a pass after the bias), and the gradient's scale in
        // both backward GEMMs and the bias sum.
        const float m = 0.22f;
        be->linear_forward_add(y_add.get(), d_x.get(), d_w.get(), c.bias ? d_b.get() : nullptr, d_r.get(), c.T, c.I,
                               c.O, m);
        cpu().linear_forward_add(y_add_ref.data(), x.data(), w.data(), c.bias ? b.data() : nullptr, r.data(), c.T, c.I,
                                 c.O, m);
        check_close("linear y + 0.22 · projection", y_add.read(), y_add_ref, tol);
        BackendBuffer dx_s(*be, c.T * c.I, dt), dw_s(*be, dw0, DType::f32), db_s(*be, db0, DType::f32);
        be->linear_backward(dx_s.get(), dw_s.floats(), c.bias ? db_s.floats() : nullptr, d_dy.get(), d_x.get(),
                            d_w.get(), c.T, c.I, c.O, false, m);
        std::vector<float> dx_s_ref(c.T * c.I), dw_s_ref = dw0, db_s_ref = db0;
        cpu().linear_backward(dx_s_ref.data(), dw_s_ref.data(), c.bias ? db_s_ref.data() : nullptr, dy.data(),
                              x.data(), w.data(), c.T, c.I, c.O, false, m);
        check_close("linear dx of 0.22 · dy", dx_s.read(), dx_s_ref, tol);
        check_close("linear dw of 0.22 · dy", dw_s.read(), dw_s_ref, tol);
        if (c.bias) check_close("linear db of 0.22 · dy", db_s.read(), db_s_ref, tol);
      }
    }
  }
}

TEST_CASE("cuda backend head_loss (chunked LM head + cross-entropy, optional final soft-cap) matches the CPU backend",
          "[gpu][head_loss][backend]") {
  MT_REQUIRE_GPU();
  struct Row {
    const char* name;
    int64_t T, H, V;
    float softcap;
    bool all_ignored = false;
  };
  // The CUDA head runs chunks of clamp(2^28 / V, 16, 4096) rows, logits rows V rounded up to 64 apart (head_chunk.h).
  const std::vector<Row> rows = {
      {"tiny T 1 H 8 V 5", 1, 8, 5, 0.f},
      {"odd T 37 H 24 V 1001 (logits rows 1024 apart)", 37, 24, 1001, 0.f},
      {"Hunyuan's odd V 128167 (logits rows 128192 apart), two chunks", 2100, 16, 128167, 0.f},
      {"Qwen vocabulary V 151936, one chunk", 64, 128, 151936, 0.f},
      {"two chunks, the second of 6 rows (V 262144: 1024 rows per chunk)", 1030, 16, 262144, 0.f},
      {"every target ignored (-100): loss 0, dx 0, dw unchanged", 20, 32, 777, 0.f, true},
      {"final soft-cap 30 (Gemma 2), V 32000", 200, 64, 32000, 30.f},
      {"final soft-cap 5 (strongly non-linear), odd V 1001", 37, 24, 1001, 5.f},
  };
  const float grad_scale = 0.37f;
  for (const Row& c : rows) {
    DYNAMIC_SECTION("head_loss " << c.name) {
      // x, w of std 2: logits of std about 4·sqrt(H), well into the soft-cap's non-linear range.
      const auto x0 = random_floats(c.T * c.H, 50, c.softcap > 0.f ? 2.f : 0.5f);
      const auto w0 = random_floats(c.V * c.H, 51, c.softcap > 0.f ? 2.f : 0.5f);
      const auto dw0 = random_floats(c.V * c.H, 52, 1e-3f);  // small, so that the comparison sees the increment
      auto targets = random_ints(c.T, 0, static_cast<int32_t>(c.V - 1), 53);
      for (int64_t t = 0; t < c.T; ++t) {
        if (c.all_ignored || t % 3 == 1) targets[t] = -100;
      }
      for (const DType dt : {DType::f32, DType::bf16}) {
        INFO(dtype_label_of(dt));
        auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
        const double tol = tolerance_of(dt);
        const auto x = rounded_to(dt, x0), w = rounded_to(dt, w0);
        BackendBuffer d_x(*be, x, dt), d_w(*be, w, dt), dx(*be, c.T * c.H, dt), dw(*be, dw0, DType::f32);
        auto* d_targets = static_cast<int32_t*>(be->alloc_bytes(c.T * 4));
        be->upload(d_targets, targets.data(), c.T * 4);
        // Evaluation's forward-only call (dx, dw null): the same loss, no gradient written.
        const double loss_only = be->head_loss(nullptr, nullptr, d_x.get(), d_w.get(), d_targets, c.T, c.H, c.V,
                                               grad_scale, c.softcap);
        CHECK(same_bits(dw.read(), dw0));
        const double loss = be->head_loss(dx.get(), dw.floats(), d_x.get(), d_w.get(), d_targets, c.T, c.H, c.V,
                                          grad_scale, c.softcap);
        CHECK(loss_only == loss);
        std::vector<float> dx_ref(c.T * c.H), dw_ref = dw0;
        const double loss_ref = cpu().head_loss(dx_ref.data(), dw_ref.data(), x.data(), w.data(), targets.data(), c.T,
                                                c.H, c.V, grad_scale, c.softcap);
        INFO("loss " << loss << " reference " << loss_ref);
        if (c.all_ignored) {
          CHECK(loss == 0.0);
          CHECK(all_zero(dx.read()));
          CHECK(same_bits(dw.read(), dw0));
        } else {
          CHECK(std::abs(loss - loss_ref) <= 1e-5 * std::abs(loss_ref));
          check_close("head_loss dx", dx.read(), dx_ref, tol);
          check_close("head_loss dw (+=)", dw.read(), dw_ref, tol);
        }
        be->free_bytes(d_targets);
      }
    }
  }
}

TEST_CASE("cuda backend dispatches the new ops (rmsnorm offset, normalize_rows, interleaved rope, gelu_tanh glu, "
          "scale, soft-capped ALiBi attention) like the CPU backend",
          "[gpu][backend]") {
  MT_REQUIRE_GPU();
  for (const DType dt : {DType::f32, DType::bf16}) {
    DYNAMIC_SECTION("backend dispatch " << dtype_label_of(dt)) {
      auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
      const double tol = tolerance_of(dt);
      {  // rmsnorm, Gemma's offset 1
        const int64_t N = 33, D = 256;
        const auto x = rounded_to(dt, random_floats(N * D, 70)), w = rounded_to(dt, random_floats(D, 71));
        const auto dy = rounded_to(dt, random_floats(N * D, 72)), dw0 = random_floats(D, 73);
        BackendBuffer d_x(*be, x, dt), d_w(*be, w, dt), d_dy(*be, dy, dt), y(*be, N * D, dt), dx(*be, N * D, dt);
        BackendBuffer dw(*be, dw0, DType::f32);
        be->rmsnorm_forward(y.get(), d_x.get(), d_w.get(), N, D, 1e-6f, 1.f);
        be->rmsnorm_backward(dx.get(), dw.floats(), d_dy.get(), d_x.get(), d_w.get(), N, D, 1e-6f, 1.f);
        std::vector<float> y_ref(N * D), dx_ref(N * D), dw_ref = dw0;
        cpu().rmsnorm_forward(y_ref.data(), x.data(), w.data(), N, D, 1e-6f, 1.f);
        cpu().rmsnorm_backward(dx_ref.data(), dw_ref.data(), dy.data(), x.data(), w.data(), N, D, 1e-6f, 1.f);
        check_close("backend rmsnorm offset 1 y", y.read(), y_ref, tol);
        check_close("backend rmsnorm offset 1 dx", dx.read(), dx_ref, tol);
        check_close("backend rmsnorm offset 1 dw", dw.read(), dw_ref, tol);
      }
      {  // normalize_rows
        const int64_t N = 40, D = 512;
        const auto x = rounded_to(dt, random_floats(N * D, 74, 0.02f)), dy = random_floats(N * D, 75);
        const auto dx0 = random_floats(N * D, 76);
        BackendBuffer d_x(*be, x, dt), y(*be, N * D, dt), d_dy(*be, dy, DType::f32), dx(*be, dx0, DType::f32);
        be->normalize_rows_forward(y.get(), d_x.get(), N, D);
        be->normalize_rows_backward(dx.floats(), d_dy.floats(), d_x.get(), N, D);
        std::vector<float> y_ref(N * D), dx_ref = dx0;
        cpu().normalize_rows_forward(y_ref.data(), x.data(), N, D);
        cpu().normalize_rows_backward(dx_ref.data(), dy.data(), x.data(), N, D);
        check_close("backend normalize_rows y", y.read(), y_ref, tol);
        check_close("backend normalize_rows dx", dx.read(), dx_ref, 1e-5);
      }
      {  // rope, interleaved (GLM), partial rot_dim
        const int64_t T = 20, heads = 3, head_dim = 64, rot_dim = 32, max_pos = 32;
        std::vector<float> cos, sin;
        rope_tables(max_pos, rot_dim, cos, sin);
        const auto positions = random_ints(T, 0, max_pos - 1, 77);
        const auto x = rounded_to(dt, random_floats(T * heads * head_dim, 78));
        BackendBuffer d_cos(*be, cos, DType::f32), d_sin(*be, sin, DType::f32), fwd(*be, x, dt), bwd(*be, x, dt);
        auto* d_pos = static_cast<int32_t*>(be->alloc_bytes(T * 4));
        be->upload(d_pos, positions.data(), T * 4);
        be->rope_forward(fwd.get(), d_cos.floats(), d_sin.floats(), d_pos, T, heads, head_dim, rot_dim, true);
        be->rope_backward(bwd.get(), d_cos.floats(), d_sin.floats(), d_pos, T, heads, head_dim, rot_dim, true);
        auto fwd_ref = x, bwd_ref = x;
        cpu().rope_forward(fwd_ref.data(), cos.data(), sin.data(), positions.data(), T, heads, head_dim, rot_dim, true);
        cpu().rope_backward(bwd_ref.data(), cos.data(), sin.data(), positions.data(), T, heads, head_dim, rot_dim, true);
        check_close("backend rope interleaved forward", fwd.read(), fwd_ref, tol);
        check_close("backend rope interleaved backward", bwd.read(), bwd_ref, tol);
        be->free_bytes(d_pos);
      }
      {  // glu gelu_tanh, scale
        const int64_t n = 4099;
        const auto g = rounded_to(dt, random_floats(n, 79, 3.f)), u = rounded_to(dt, random_floats(n, 80));
        const auto dy = rounded_to(dt, random_floats(n, 81));
        BackendBuffer d_g(*be, g, dt), d_u(*be, u, dt), d_dy(*be, dy, dt), y(*be, n, dt), dg(*be, n, dt),
            du(*be, n, dt);
        be->glu_forward(y.get(), d_g.get(), d_u.get(), 1, n, n, Activation::gelu_tanh);
        be->glu_backward(dg.get(), du.get(), nullptr, d_dy.get(), d_g.get(), d_u.get(), 1, n, n, Activation::gelu_tanh);
        std::vector<float> y_ref(n), dg_ref(n), du_ref(n);
        cpu().glu_forward(y_ref.data(), g.data(), u.data(), 1, n, n, Activation::gelu_tanh);
        cpu().glu_backward(dg_ref.data(), du_ref.data(), nullptr, dy.data(), g.data(), u.data(), 1, n, n,
                           Activation::gelu_tanh);
        check_close("backend glu gelu_tanh y", y.read(), y_ref, tol);
        check_close("backend glu gelu_tanh dgate", dg.read(), dg_ref, tol);
        check_close("backend glu gelu_tanh dup", du.read(), du_ref, tol);

        be->scale(d_g.get(), 0.125f, n);
        std::vector<float> scaled = g;
        cpu().scale(scaled.data(), 0.125f, n);
        check_close("backend scale", d_g.read(), rounded_to(dt, scaled), 0.0);
      }
      {  // attention: soft-cap + ALiBi + custom scale, slopes in backend memory
        const int64_t batch = 2, seq = 70, heads = 6, kv_heads = 2, head_dim = 64;
        const std::vector<int32_t> lens = {70, 45};
        const auto slopes = alibi_slopes(heads);
        const int64_t q_size = batch * seq * heads * head_dim, kv_size = batch * seq * kv_heads * head_dim;
        const int64_t lse_size = batch * heads * seq;
        mt::AttnShape host{.batch = batch, .seq = seq, .n_heads = heads, .n_kv_heads = kv_heads, .head_dim = head_dim,
                           .window = 40, .scale = 0.2f, .softcap = 2.5f};
        host.alibi_slopes = slopes.data();
        host.seq_lens = lens.data();
        BackendBuffer d_slopes(*be, slopes, DType::f32);
        auto* d_lens = static_cast<int32_t*>(be->alloc_bytes(batch * 4));
        be->upload(d_lens, lens.data(), batch * 4);
        mt::AttnShape dev = host;
        dev.alibi_slopes = d_slopes.floats();
        dev.seq_lens = d_lens;
        const auto q = rounded_to(dt, random_floats(q_size, 82)), k = rounded_to(dt, random_floats(kv_size, 83));
        const auto v = rounded_to(dt, random_floats(kv_size, 84)), dout = rounded_to(dt, random_floats(q_size, 85));
        BackendBuffer d_q(*be, q, dt), d_k(*be, k, dt), d_v(*be, v, dt), d_dout(*be, dout, dt);
        BackendBuffer out(*be, q_size, dt), dq(*be, q_size, dt), dk(*be, kv_size, dt), dv(*be, kv_size, dt);
        BackendBuffer lse(*be, lse_size, DType::f32);
        be->attention_forward(out.get(), lse.floats(), d_q.get(), d_k.get(), d_v.get(), dev);
        be->attention_backward(dq.get(), dk.get(), dv.get(), d_dout.get(), d_q.get(), d_k.get(), d_v.get(), out.get(),
                               lse.floats(), dev);
        std::vector<float> out_ref(q_size), lse_ref(lse_size), dq_ref(q_size), dk_ref(kv_size), dv_ref(kv_size);
        cpu().attention_forward(out_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), host);
        cpu().attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), dout.data(), q.data(), k.data(),
                                 v.data(), out_ref.data(), lse_ref.data(), host);
        check_close("backend attention out", out.read(), out_ref, tol);
        check_close("backend attention lse", lse.read(), lse_ref, 1e-5);
        check_close("backend attention dq", dq.read(), dq_ref, tol);
        check_close("backend attention dk", dk.read(), dk_ref, tol);
        check_close("backend attention dv", dv.read(), dv_ref, tol);
        be->free_bytes(d_lens);
      }
    }
  }
}
