// The CUDA backend's lightning attention (MiniMax) and add_scaled against the CPU backend, through the Backend
// interface: forward and backward on a few shapes — MiniMax-Text-01's head (128) and a head_dim that is not a multiple
// of 32 (a partial column tile) or of 8 (the state rows split unevenly over the 8 row groups), one head to 64, lengths
// 1 to 1024, decay factors near 1 and near 0 (the last layer's), padded rows (o = 0 and no gradient past each length;
// a length-0 row) and packed rows (the state restarting per example, one example a token long) — fp32 and bf16
// (bf16 inputs rounded first). Tolerances ‖out − ref‖/‖ref‖: 1e-5 forward and 1e-4 backward in fp32 (sums in another
// order over hundreds of tokens), 2e-2 in bf16 (storage).
#include <algorithm>
#include <cmath>
#include <string>

#include "backend/backend.h"
#include "gpu/gpu_test_util.h"
#include "kernels/runtime/cuda_backend.h"

namespace {

using namespace mt::test;
using mt::DType;
using mt::LightningShape;

const char* dtype_label_of(DType dt) { return dt == DType::f32 ? "float32" : "bfloat16"; }

struct LightningCase {
  const char* name;
  int64_t batch, seq, heads, head_dim;
  double decay_factor;
  std::vector<int32_t> lens;      // empty: all valid
  std::vector<int32_t> segments;  // empty: one example a row
};

// Example ids of a packed batch: each row cut at `cuts` (token indices where a new example starts).
std::vector<int32_t> packed(int64_t batch, int64_t seq, const std::vector<int64_t>& cuts) {
  std::vector<int32_t> seg(static_cast<size_t>(batch * seq));
  int32_t id = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < seq; ++t) {
      if (t > 0 && std::find(cuts.begin(), cuts.end(), t) != cuts.end()) ++id;
      seg[static_cast<size_t>(b * seq + t)] = id;
    }
    ++id;
  }
  return seg;
}

std::vector<LightningCase> cases() {
  return {
      {"one token", 1, 1, 2, 16, 1.0, {}, {}},
      {"128 x 8 heads, 300 tokens", 2, 300, 8, 128, 1.0, {}, {}},
      {"head_dim 40 (partial tile), padded", 3, 257, 4, 40, 0.5, {257, 100, 0}, {}},
      {"head_dim 13, 64 heads", 1, 70, 64, 13, 0.25, {}, {}},
      {"last layer's factor, 1024 tokens", 1, 1024, 2, 64, 1.0 - 79.0 / (79.0 + 1e-5) + 1e-5, {}, {}},
      {"packed, examples of 1..200 tokens", 2, 256, 4, 32, 0.8, {}, packed(2, 256, {1, 2, 50, 250, 255})},
      {"packed and padded", 2, 130, 3, 24, 0.9, {130, 77}, packed(2, 130, {30, 31, 90})},
  };
}

}  // namespace

TEST_CASE("cuda backend lightning attention matches the CPU backend", "[gpu][lightning]") {
  MT_REQUIRE_GPU();
  for (const DType dt : {DType::f32, DType::bf16}) {
    for (const LightningCase& c : cases()) {
      DYNAMIC_SECTION("lightning " << c.name << " " << dtype_label_of(dt)) {
        auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
        LightningShape s;
        s.batch = c.batch;
        s.seq = c.seq;
        s.n_heads = c.heads;
        s.head_dim = c.head_dim;
        s.decay_factor = c.decay_factor;
        const int64_t T = c.batch * c.seq;
        // Raw q, k, v around 0 (SiLU's both sides); scaled so the decayed sums stay O(1) per token.
        const auto qkv = rounded_to(dt, random_floats(T * s.row(), 21, 1.f / std::sqrt(static_cast<float>(c.head_dim))));
        const auto d_o = rounded_to(dt, random_floats(T * s.width(), 22));
        BackendBuffer d_qkv_in(*be, qkv, dt), d_do(*be, d_o, dt), o(*be, T * s.width(), dt),
            d_qkv(*be, T * s.row(), dt);
        const Ints lens(*be, c.lens), segments(*be, c.segments);
        LightningShape gpu = s, host = s;
        if (!c.lens.empty()) {
          gpu.seq_lens = lens.p;
          host.seq_lens = c.lens.data();
        }
        if (!c.segments.empty()) {
          gpu.segments = segments.p;
          host.segments = c.segments.data();
        }
        be->lightning_attention_forward(o.get(), d_qkv_in.get(), gpu);
        be->lightning_attention_backward(d_qkv.get(), d_do.get(), d_qkv_in.get(), gpu);
        std::vector<float> o_ref(static_cast<size_t>(T * s.width())), d_ref(static_cast<size_t>(T * s.row()));
        cpu().lightning_attention_forward(o_ref.data(), qkv.data(), host);
        cpu().lightning_attention_backward(d_ref.data(), d_o.data(), qkv.data(), host);
        const bool f32 = dt == DType::f32;
        check_close("lightning o", o.read(), o_ref, f32 ? 1e-5 : 2e-2);
        check_close("lightning d_qkv", d_qkv.read(), d_ref, f32 ? 1e-4 : 2e-2);
        if (!c.lens.empty()) {  // padding exactly zero (the buffers start as NaN)
          const auto out = o.read(), grad = d_qkv.read();
          for (int64_t b = 0; b < c.batch; ++b)
            for (int64_t t = c.lens[static_cast<size_t>(b)]; t < c.seq; ++t) {
              for (int64_t i = 0; i < s.width(); ++i) REQUIRE(out[static_cast<size_t>((b * c.seq + t) * s.width() + i)] == 0.f);
              for (int64_t i = 0; i < s.row(); ++i) REQUIRE(grad[static_cast<size_t>((b * c.seq + t) * s.row() + i)] == 0.f);
            }
        }
      }
    }
  }
}

TEST_CASE("cuda backend add_scaled matches the CPU backend", "[gpu][lightning]") {
  MT_REQUIRE_GPU();
  for (const DType dt : {DType::f32, DType::bf16}) {
    DYNAMIC_SECTION("add_scaled " << dtype_label_of(dt)) {
      auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
      const int64_t n = 10007;
      const auto x = rounded_to(dt, random_floats(n, 23)), y0 = rounded_to(dt, random_floats(n, 24));
      BackendBuffer d_x(*be, x, dt), d_y(*be, y0, dt);
      be->add_scaled(d_y.get(), d_x.get(), 3.5565588f, 0.75f, n);
      std::vector<float> y_ref = y0;
      cpu().add_scaled(y_ref.data(), x.data(), 3.5565588f, 0.75f, n);
      check_close("add_scaled y", d_y.read(), y_ref, dt == DType::f32 ? 1e-6 : 1e-2);
    }
  }
}
