// Runs kernels/ops/lightning_attention_chunked.cu's kernel on the CPU (emu_cuda.h; the kernel source with its launches
// turned into emu_launch, as kernels_emu.h, which run_lightning_chunked.sh writes) through its own launchers, forward
// and backward, and prints ‖out − ref‖/‖ref‖ against the CPU backend's recurrent reference for o, dq, dk and dv.
// Usage: lightning_chunked SEQ HEAD_DIM HEADS DECAY_FACTOR SEGMENT f|b   (2 sequences, the second 9 tokens shorter;
// SEGMENT: packed examples of that many tokens starting at token 5, 0 = none; f: fp32, b: bf16, inputs rounded).
#include <cstdio>
#include <random>

#include "backend/cpu/cpu_ops.h"
#include "kernels_emu.h"

using namespace mt;
using namespace mt::cuda;

namespace {

template <typename E>
std::vector<float> floats(const std::vector<E>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = to_f32(x[i]);
  return out;
}

// ‖a − b‖/‖b‖ over part p of [T, heads, parts·d] (parts 1: o; 3: q, k, v); NaN where a holds one.
double rel(const std::vector<float>& a, const std::vector<float>& b, int64_t d, int parts, int p) {
  double n = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (static_cast<int64_t>(i) / d % parts != p) continue;
    n += (a[i] - b[i]) * double(a[i] - b[i]);
    r += double(b[i]) * b[i];
  }
  return std::sqrt(n / r);
}

template <typename E>
int run(char** argv) {
  LightningShape s;
  s.batch = 2;
  s.seq = atoi(argv[1]);
  s.head_dim = atoi(argv[2]);
  s.n_heads = atoi(argv[3]);
  s.decay_factor = atof(argv[4]);
  const int64_t segment = atoi(argv[5]), T_ = s.batch * s.seq;
  std::vector<int32_t> lens = {static_cast<int32_t>(s.seq), static_cast<int32_t>(std::max<int64_t>(s.seq - 9, 0))};
  std::vector<int32_t> segs(T_, 0);
  for (int64_t t = 0; segment && t < T_; ++t)
    segs[t] = static_cast<int32_t>(t % s.seq >= 5 ? 1 + (t % s.seq - 5) / segment : 0);
  s.seq_lens = lens.data();
  s.segments = segment ? segs.data() : nullptr;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> U(-1, 1);
  std::vector<E> qkv(T_ * s.row()), d_o(T_ * s.width());
  for (auto& x : qkv) x = from_f32<E>(U(rng));
  for (auto& x : d_o) x = from_f32<E>(U(rng));
  const float nan = std::nanf("");
  std::vector<E> o(T_ * s.width(), from_f32<E>(nan)), dqkv(T_ * s.row(), from_f32<E>(nan));
  lightning_attention_chunked_forward(o.data(), qkv.data(), s, nullptr);
  lightning_attention_chunked_backward(dqkv.data(), d_o.data(), qkv.data(), s, nullptr);
  const std::vector<float> qkv_f = floats(qkv), d_o_f = floats(d_o);
  std::vector<float> o_ref(o.size()), d_ref(dqkv.size());
  cpu::lightning_attention_forward(o_ref.data(), qkv_f.data(), s);
  cpu::lightning_attention_backward(d_ref.data(), d_o_f.data(), qkv_f.data(), s);
  const std::vector<float> of = floats(o), df = floats(dqkv);
  std::printf("%s seq %ld head_dim %ld heads %ld decay %g segment %ld: o %.3g dq %.3g dk %.3g dv %.3g\n",
              sizeof(E) == 4 ? "fp32" : "bf16", static_cast<long>(s.seq), static_cast<long>(s.head_dim),
              static_cast<long>(s.n_heads), s.decay_factor, static_cast<long>(segment),
              rel(of, o_ref, s.head_dim, 1, 0), rel(df, d_ref, s.head_dim, 3, 0), rel(df, d_ref, s.head_dim, 3, 1),
              rel(df, d_ref, s.head_dim, 3, 2));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s SEQ HEAD_DIM HEADS DECAY_FACTOR SEGMENT f|b\n", argv[0]);
    return 2;
  }
  return argv[6][0] == 'b' ? run<__nv_bfloat16>(argv) : run<float>(argv);
}
