// Lightning attention (MiniMax) on the GPU against the CPU reference: the chunked kernel (chunks of 64 tokens) and the
// recurrent one called directly, and the CUDA backend (the chunked kernel for bf16 up to head_dim 128, else the
// recurrent one), forward and backward (dq, dk, dv of the raw q, k, v each checked alone), fp32 and bf16 (bf16
// inputs rounded first). Shapes: shorter than a chunk, exactly one, several with a partial last one, MiniMax-Text-01's
// head (128) and the bench's (96), head dims that are not multiples of 32 or 8 (partial column tiles, the
// unvectorised loads), padded batches (o = 0 and no gradient past each length, lengths 0, 1, 64, 65), packed rows
// (examples of one token, starting mid-chunk and on a chunk boundary, crossing chunks), heads with distinct decays
// (near 1 over 1024 tokens, and strong: w down to 0.004). Tolerances ‖out − ref‖/‖ref‖: 1e-5 forward and 1e-4
// backward in fp32 (sums in another order over hundreds of tokens), 2e-2 in bf16 (storage; the chunked kernel's
// tensor-core operands are bf16 too). A failure names the case, dtype, kernel, tensor and its worst element
// [sequence, token, head, column]. The chunked kernel must also give the same bits twice. "[.lightning_bench]"
// (hidden) times both kernels at MiniMax-Text-01's 64 heads of 128, 1 and 8 x 4096 tokens.
// Invariant: every case runs both dtypes; a kernel's buffers start as NaN, so an element never written fails.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "backend/backend.h"
#include "gpu/gpu_test_util.h"
#include "kernels/ops/kernels.h"
#include "kernels/runtime/cuda_backend.h"

namespace {

using namespace mt::test;
using mt::DType;
using mt::LightningShape;
using bf16 = __nv_bfloat16;

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

// MiniMax-Text-01's last layer's decay factor: λ_h about 1e-5 (w within 1e-5 of 1).
const double kNearOne = 1.0 - 79.0 / (79.0 + 1e-5) + 1e-5;

std::vector<LightningCase> cases() {
  return {
      {"one token", 1, 1, 2, 16, 1.0, {}, {}},
      {"shorter than a chunk: 37 tokens", 2, 37, 3, 64, 1.0, {}, {}},
      {"exactly one chunk: 64 tokens", 2, 64, 4, 128, 1.0, {}, {}},
      {"128 x 8 heads, 300 tokens (4 chunks + 44)", 2, 300, 8, 128, 1.0, {}, {}},
      {"head_dim 96, 200 tokens", 1, 200, 4, 96, 1.0, {}, {}},
      {"head_dim 40 (partial tile), padded", 3, 257, 4, 40, 0.5, {257, 100, 0}, {}},
      {"padded at 1, 64, 65 and 0 tokens", 5, 150, 2, 64, 1.0, {150, 1, 64, 65, 0}, {}},
      {"head_dim 13, 64 heads", 1, 70, 64, 13, 0.25, {}, {}},
      {"decay near 1, 1024 tokens", 1, 1024, 2, 64, kNearOne, {}, {}},
      {"16 heads, strong decays (w 0.004 .. 0.97)", 2, 333, 16, 32, 8.0, {}, {}},
      {"packed, examples of 1..200 tokens", 2, 256, 4, 32, 0.8, {}, packed(2, 256, {1, 2, 50, 250, 255})},
      {"packed mid-chunk and on chunk boundaries", 2, 300, 3, 128, 0.6, {},
       packed(2, 300, {1, 40, 63, 64, 100, 128, 129, 200, 299})},
      {"packed and padded", 2, 130, 3, 24, 0.9, {130, 77}, packed(2, 130, {30, 31, 90})},
  };
}

// One tensor [batch·seq, heads, head_dim] against its reference: the relative error and the worst element.
void check_tensor(const std::string& label, const std::vector<float>& got, const std::vector<float>& want,
                  const LightningCase& c, double tol) {
  REQUIRE(got.size() == want.size());
  double diff2 = 0.0, ref2 = 0.0, worst = -1.0;
  size_t at = 0;
  for (size_t e = 0; e < got.size(); ++e) {
    const double d = std::fabs(static_cast<double>(got[e]) - want[e]);
    diff2 += d * d;
    ref2 += static_cast<double>(want[e]) * want[e];
    if (std::isnan(d) || d > worst) {
      worst = std::isnan(d) ? INFINITY : d;
      at = e;
      if (std::isnan(d)) break;
    }
  }
  const double err = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  const int64_t d = c.head_dim, row = static_cast<int64_t>(at) / (c.heads * d);
  std::ostringstream m;
  m << label << ": relative error " << err << " (tolerance " << tol << ", " << got.size()
    << " elements); worst at [seq " << row / c.seq << ", token " << row % c.seq << ", head " << static_cast<int64_t>(at) / d % c.heads << ", column "
    << static_cast<int64_t>(at) % d << "]: got " << got[at] << ", want " << want[at];
  INFO(m.str());
  CHECK(err <= tol);  // false for NaN: an element never written
}

// Part p (0 q, 1 k, 2 v) of a d_qkv as [T, heads, head_dim].
std::vector<float> part_of(const std::vector<float>& qkv, const LightningCase& c, int p) {
  const int64_t d = c.head_dim, T = c.batch * c.seq;
  std::vector<float> out(static_cast<size_t>(T * c.heads * d));
  for (int64_t r = 0; r < T; ++r)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t i = 0; i < d; ++i)
        out[static_cast<size_t>((r * c.heads + h) * d + i)] =
            qkv[static_cast<size_t>((r * c.heads + h) * 3 * d + p * d + i)];
  return out;
}

// o and d_qkv against the reference, each gradient alone, and padding exactly zero.
void check_results(const std::string& label, const LightningCase& c, bool f32, const std::vector<float>& o,
                   const std::vector<float>& d_qkv, const std::vector<float>& o_ref, const std::vector<float>& d_ref) {
  check_tensor(label + " o", o, o_ref, c, f32 ? 1e-5 : 2e-2);
  const char* names[3] = {" dq", " dk", " dv"};
  for (int p = 0; p < 3; ++p)
    check_tensor(label + names[p], part_of(d_qkv, c, p), part_of(d_ref, c, p), c, f32 ? 1e-4 : 2e-2);
  if (c.lens.empty()) return;
  const int64_t width = c.heads * c.head_dim;
  int64_t nonzero = 0;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t t = c.lens[static_cast<size_t>(b)]; t < c.seq; ++t) {
      for (int64_t i = 0; i < width; ++i) nonzero += o[static_cast<size_t>((b * c.seq + t) * width + i)] != 0.f;
      for (int64_t i = 0; i < 3 * width; ++i)
        nonzero += d_qkv[static_cast<size_t>((b * c.seq + t) * 3 * width + i)] != 0.f;
    }
  INFO(label << ": padding elements of o and d_qkv not exactly zero: " << nonzero);
  CHECK(nonzero == 0);
}

LightningShape shape_of(const LightningCase& c) {
  LightningShape s;
  s.batch = c.batch;
  s.seq = c.seq;
  s.n_heads = c.heads;
  s.head_dim = c.head_dim;
  s.decay_factor = c.decay_factor;
  return s;
}

struct Reference {
  std::vector<float> qkv, d_o, o, d_qkv;
};

// Inputs (rounded to dt) and the CPU reference's outputs for case c.
Reference reference_of(const LightningCase& c, DType dt) {
  LightningShape s = shape_of(c);
  if (!c.lens.empty()) s.seq_lens = c.lens.data();
  if (!c.segments.empty()) s.segments = c.segments.data();
  const int64_t T = c.batch * c.seq;
  Reference r;
  // Raw q, k, v around 0 (SiLU's both sides); scaled so the decayed sums stay O(1) per token.
  r.qkv = rounded_to(dt, random_floats(T * s.row(), 21, 1.f / std::sqrt(static_cast<float>(c.head_dim))));
  r.d_o = rounded_to(dt, random_floats(T * s.width(), 22));
  r.o.resize(static_cast<size_t>(T * s.width()));
  r.d_qkv.resize(static_cast<size_t>(T * s.row()));
  cpu().lightning_attention_forward(r.o.data(), r.qkv.data(), s);
  cpu().lightning_attention_backward(r.d_qkv.data(), r.d_o.data(), r.qkv.data(), s);
  return r;
}

}  // namespace

TEST_CASE("lightning attention kernels (chunked, recurrent) match the CPU reference", "[gpu][lightning]") {
  MT_REQUIRE_GPU();
  for_each_dtype([&]<typename T>() {
    const DType dt = is_f32<T> ? DType::f32 : DType::bf16;
    for (const LightningCase& c : cases()) {
      DYNAMIC_SECTION("lightning kernels " << c.name << " " << dtype_label<T>) {
        const Reference r = reference_of(c, dt);
        const auto qkv = upload<T>(r.qkv), d_o = upload<T>(r.d_o);
        const auto lens = upload_ints(c.lens), segments = upload_ints(c.segments);
        LightningShape s = shape_of(c);
        if (!c.lens.empty()) s.seq_lens = lens->get();
        if (!c.segments.empty()) s.segments = segments->get();
        REQUIRE(mt::cuda::lightning_attention_chunked_supports(s));
        for (const bool chunked : {true, false}) {
          DeviceBuffer<T> o(r.o.size()), d_qkv(r.d_qkv.size());
          if (chunked) {
            mt::cuda::lightning_attention_chunked_forward(o.get(), qkv->get(), s, test_stream());
            mt::cuda::lightning_attention_chunked_backward(d_qkv.get(), d_o->get(), qkv->get(), s, test_stream());
          } else {
            mt::cuda::lightning_attention_forward(o.get(), qkv->get(), s, test_stream());
            mt::cuda::lightning_attention_backward(d_qkv.get(), d_o->get(), qkv->get(), s, test_stream());
          }
          MT_CUDA_OK(cudaGetLastError());
          mt::test::sync();
          std::ostringstream label;
          label << c.name << " [batch " << c.batch << " x " << c.seq << ", " << c.heads << " heads of " << c.head_dim
                << ", decay factor " << c.decay_factor << "] " << dtype_label<T>
                << (chunked ? " chunked" : " recurrent");
          const std::vector<float> o_got = download(o), d_got = download(d_qkv);
          check_results(label.str(), c, is_f32<T>, o_got, d_got, r.o, r.d_qkv);
          if (chunked) {  // deterministic: the same bits again
            DeviceBuffer<T> o2(r.o.size()), d2(r.d_qkv.size());
            mt::cuda::lightning_attention_chunked_forward(o2.get(), qkv->get(), s, test_stream());
            mt::cuda::lightning_attention_chunked_backward(d2.get(), d_o->get(), qkv->get(), s, test_stream());
            mt::test::sync();
            INFO(label.str() << ": a second call gave other bits");
            CHECK(same_bits(download(o2), o_got));
            CHECK(same_bits(download(d2), d_got));
          }
        }
      }
    }
  });
}

TEST_CASE("cuda backend lightning attention matches the CPU backend", "[gpu][lightning]") {
  MT_REQUIRE_GPU();
  std::vector<LightningCase> all = cases();
  all.push_back({"head_dim 160 (past the chunked kernel: recurrent)", 2, 90, 2, 160, 1.0, {90, 70}, {}});
  for (const DType dt : {DType::f32, DType::bf16}) {
    for (const LightningCase& c : all) {
      DYNAMIC_SECTION("lightning backend " << c.name << " " << dtype_label_of(dt)) {
        auto be = mt::make_cuda_backend(dt, 0, mt::environment_switches());
        const Reference r = reference_of(c, dt);
        LightningShape s = shape_of(c);
        BackendBuffer qkv(*be, r.qkv, dt), d_o(*be, r.d_o, dt), o(*be, static_cast<int64_t>(r.o.size()), dt),
            d_qkv(*be, static_cast<int64_t>(r.d_qkv.size()), dt);
        const Ints lens(*be, c.lens), segments(*be, c.segments);
        if (!c.lens.empty()) s.seq_lens = lens.p;
        if (!c.segments.empty()) s.segments = segments.p;
        be->lightning_attention_forward(o.get(), qkv.get(), s);
        be->lightning_attention_backward(d_qkv.get(), d_o.get(), qkv.get(), s);
        std::ostringstream label;
        label << c.name << " " << dtype_label_of(dt) << " backend";
        check_results(label.str(), c, dt == DType::f32, o.read(), d_qkv.read(), r.o, r.d_qkv);
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

namespace {

// ‖a − b‖/‖b‖.
double relative(const std::vector<float>& a, const std::vector<float>& b) {
  double d2 = 0.0, b2 = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    d2 += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    b2 += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(d2 / b2);
}

template <typename T>
void bench(int64_t batch, int64_t seq) {
  LightningShape s;
  s.batch = batch;
  s.seq = seq;
  s.n_heads = 64;
  s.head_dim = 128;
  s.decay_factor = 1.0;
  const int64_t T_ = batch * seq;
  const auto qkv = upload<T>(random_floats(T_ * s.row(), 21, 1.f / std::sqrt(128.f)));
  const auto d_o = upload<T>(random_floats(T_ * s.width(), 22));
  DeviceBuffer<T> o_r(static_cast<size_t>(T_ * s.width())), o_c(o_r.size()), g_r(static_cast<size_t>(T_ * s.row())),
      g_c(g_r.size());
  // The recurrent form's FLOPs (state update and read-out, 2·d² each a token and head; the backward three sweeps),
  // the same count for both kernels.
  const double fwd_flops = 4.0 * static_cast<double>(T_ * s.n_heads) * 128.0 * 128.0, bwd_flops = 3.0 * fwd_flops;
  const int calls = batch > 1 ? 2 : 5;
  const auto cs = test_stream();
  using namespace mt::cuda;
  const double ms[4] = {
      milliseconds_per_call(calls, [&] { lightning_attention_forward(o_r.get(), qkv->get(), s, cs); }),
      milliseconds_per_call(calls, [&] { lightning_attention_chunked_forward(o_c.get(), qkv->get(), s, cs); }),
      milliseconds_per_call(calls, [&] { lightning_attention_backward(g_r.get(), d_o->get(), qkv->get(), s, cs); }),
      milliseconds_per_call(calls,
                            [&] { lightning_attention_chunked_backward(g_c.get(), d_o->get(), qkv->get(), s, cs); })};
  const char* names[4] = {"recurrent forward", "chunked forward", "recurrent backward", "chunked backward"};
  for (int i = 0; i < 4; ++i)
    std::printf("lightning_bench %s %lld x %lld, 64 heads of 128, %-18s: %9.3f ms %7.2f TFLOP/s\n", dtype_label<T>,
                static_cast<long long>(batch), static_cast<long long>(seq), names[i], ms[i],
                (i < 2 ? fwd_flops : bwd_flops) / (ms[i] * 1e-3) / 1e12);
  std::printf("lightning_bench %s %lld x %lld: speed-up forward %.1fx, backward %.1fx; chunked against recurrent "
              "o %.2e, d_qkv %.2e\n", dtype_label<T>, static_cast<long long>(batch), static_cast<long long>(seq),
              ms[0] / ms[1], ms[2] / ms[3], relative(download(o_c), download(o_r)),
              relative(download(g_c), download(g_r)));
}

}  // namespace

TEST_CASE("lightning attention probe: recurrent against chunked at MiniMax-Text-01's heads", "[.lightning_bench]") {
  MT_REQUIRE_GPU();
  bench<bf16>(1, 4096);
  bench<bf16>(8, 4096);
  bench<float>(1, 4096);
}
