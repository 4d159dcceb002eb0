// The LayerNorm op (kernels/ops/layernorm.cu) and the non-gated activation (kernels/ops/glu.cu without u) against the CPU
// reference, as test_cuda_ops.cpp's table does: rows of shapes × options × {fp32, bf16}, ‖out − ref‖/‖ref‖ within
// tolerance<T>, each run twice and compared bit for bit; the residual fused into the backward (also into dx itself)
// gives the bits of the backward followed by add.
#include <vector>

#include "backend/backend.h"
#include "gpu/gpu_test_util.h"
#include "kernels/ops/kernels.h"

namespace {

using namespace mt::test;
namespace cu = mt::cuda;
using mt::Activation;

TEST_CASE("cuda layernorm forward and backward (bias or none, a weight row per head, a residual) match the reference",
          "[gpu][layernorm]") {
  MT_REQUIRE_GPU();
  struct Row {
    int64_t N, D, weight_rows;
    bool bias;
  };
  const float eps = 1e-5f;
  for (const Row c : {Row{1, 6, 1, false}, Row{7, 128, 1, true}, Row{300, 2048, 1, true}, Row{1000, 100, 1, false},
                      Row{64, 8192, 1, true}, Row{96, 128, 8, false}, Row{40, 100, 4, true}}) {
    DYNAMIC_SECTION("layernorm N = " << c.N << " D = " << c.D << " weight rows " << c.weight_rows
                                     << (c.bias ? " bias" : " no bias") << (c.D % 8 != 0 ? " (scalar path)" : "")) {
      const int64_t W = c.weight_rows * c.D;
      const auto x0 = random_floats(c.N * c.D, 20, 2.f), w0 = random_floats(W, 21), b0 = random_floats(W, 22);
      const auto dy0 = random_floats(c.N * c.D, 23), dw0 = random_floats(W, 24), db0 = random_floats(W, 25);
      for_each_dtype([&]<typename T>() {
        INFO(dtype_label<T>);
        const auto x = rounded<T>(x0), w = rounded<T>(w0), b = rounded<T>(b0), dy = rounded<T>(dy0);
        auto d_x = upload<T>(x), d_w = upload<T>(w), d_b = upload<T>(b), d_dy = upload<T>(dy);
        auto dw = upload<float>(dw0), dw_again = upload<float>(dw0), db = upload<float>(db0),
             db_again = upload<float>(db0);
        const T* bias = c.bias ? d_b->get() : nullptr;
        DeviceBuffer<T> y(c.N * c.D), dx(c.N * c.D), dx_again(c.N * c.D);
        cu::layernorm_forward<T>(y.get(), d_x->get(), d_w->get(), bias, c.N, c.D, c.weight_rows, eps, test_stream());
        cu::layernorm_backward<T>(dx.get(), dw->get(), c.bias ? db->get() : nullptr, d_dy->get(), d_x->get(),
                                  d_w->get(), nullptr, c.N, c.D, c.weight_rows, eps, test_stream());
        cu::layernorm_backward<T>(dx_again.get(), dw_again->get(), c.bias ? db_again->get() : nullptr, d_dy->get(),
                                  d_x->get(), d_w->get(), nullptr, c.N, c.D, c.weight_rows, eps, test_stream());
        std::vector<float> y_ref(c.N * c.D), dx_ref(c.N * c.D), dw_ref = dw0, db_ref = db0;
        cpu().layernorm_forward(y_ref.data(), x.data(), w.data(), c.bias ? b.data() : nullptr, c.N, c.D,
                                c.weight_rows, eps);
        cpu().layernorm_backward(dx_ref.data(), dw_ref.data(), c.bias ? db_ref.data() : nullptr, dy.data(), x.data(),
                                 w.data(), nullptr, c.N, c.D, c.weight_rows, eps);
        check_close("layernorm y", download(y), y_ref, tolerance<T>);
        const auto got_dx = download(dx), got_dw = download(*dw), got_db = download(*db);
        check_close("layernorm dx", got_dx, dx_ref, tolerance<T>);
        check_close("layernorm dw", got_dw, dw_ref, tolerance<T>);
        check_close("layernorm db", got_db, db_ref, tolerance<T>);
        CHECK(same_bits(got_dx, download(dx_again)));
        CHECK(same_bits(got_dw, download(*dw_again)));
        CHECK(same_bits(got_db, download(*db_again)));

        // The residual in the backward's pass: the bits of the backward, then add; also with dx the residual itself.
        const auto r = rounded<T>(random_floats(c.N * c.D, 26));
        auto d_r = upload<T>(r), in_place = upload<T>(r), dw_fused = upload<float>(dw0);
        DeviceBuffer<T> dx_fused(c.N * c.D);
        cu::layernorm_backward<T>(dx_fused.get(), dw_fused->get(), nullptr, d_dy->get(), d_x->get(), d_w->get(),
                                  d_r->get(), c.N, c.D, c.weight_rows, eps, test_stream());
        cu::layernorm_backward<T>(in_place->get(), dw_fused->get(), nullptr, d_dy->get(), d_x->get(), d_w->get(),
                                  in_place->get(), c.N, c.D, c.weight_rows, eps, test_stream());
        cu::add<T>(dx.get(), d_r->get(), c.N * c.D, test_stream());
        CHECK(same_bits(download(dx_fused), download(dx)));
        CHECK(same_bits(download(*in_place), download(dx)));
      });
    }
  }
}

TEST_CASE("cuda glu without u (a non-gated MLP's activation) matches the reference", "[gpu][glu]") {
  MT_REQUIRE_GPU();
  for (const Activation act : {Activation::silu, Activation::gelu_tanh}) {
    for (const int64_t n : {int64_t{1}, int64_t{1000}, int64_t{4099}, int64_t{1} << 20}) {
      DYNAMIC_SECTION("glu without u " << (act == Activation::silu ? "silu" : "gelu_tanh") << " n = " << n) {
        const auto g0 = random_floats(n, 30, 2.f), dy0 = random_floats(n, 31);
        for_each_dtype([&]<typename T>() {
          INFO(dtype_label<T>);
          const auto g = rounded<T>(g0), dy = rounded<T>(dy0);
          auto d_g = upload<T>(g), d_dy = upload<T>(dy);
          DeviceBuffer<T> y(n), dg(n), y_back(n), dg_again(n);
          cu::glu_forward<T>(y.get(), d_g->get(), nullptr, 1, n, n, act, test_stream());
          cu::glu_backward<T>(dg.get(), nullptr, y_back.get(), d_dy->get(), d_g->get(), nullptr, 1, n, n, act,
                              test_stream());
          cu::glu_backward<T>(dg_again.get(), nullptr, nullptr, d_dy->get(), d_g->get(), nullptr, 1, n, n, act,
                              test_stream());
          std::vector<float> y_ref(n), dg_ref(n);
          cpu().glu_forward(y_ref.data(), g.data(), nullptr, 1, n, n, act);
          cpu().glu_backward(dg_ref.data(), nullptr, nullptr, dy.data(), g.data(), nullptr, 1, n, n, act);
          const auto got_y = download(y), got_dg = download(dg);
          check_close("glu without u y", got_y, y_ref, tolerance<T>);
          check_close("glu without u dg", got_dg, dg_ref, tolerance<T>);
          CHECK(same_bits(download(y_back), got_y));
          CHECK(same_bits(download(dg_again), got_dg));
        });
      }
    }
  }
}

}  // namespace
