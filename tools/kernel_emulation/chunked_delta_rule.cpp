// Runs kernels/ops/gated_delta_rule_chunked.cu's kernels on the CPU (emu_cuda.h; the kernel source, its launchers cut,
// is included as kernels_emu.h, which run_chunked_delta_rule.sh writes) the way its launchers do, forward and
// backward, and prints ‖out − ref‖/‖ref‖ against the CPU backend's recurrent reference for o, d_qkv, dg and dbeta.
// Usage: chunked_delta_rule SEQ K_HEAD_DIM V_HEAD_DIM SEGMENT f|b [K_HEADS]   (2 sequences, the last 9 tokens
// shorter; K_HEADS k heads (default 1), twice as many v heads; SEGMENT: packed examples of that many tokens, 0 = none;
// f: fp32, b: bf16 with the inputs rounded).
#include <cstdio>
#include <random>

#include "backend/cpu/cpu_ops.h"
#include "kernels_emu.h"

using namespace mt;
using namespace mt::cuda;

namespace {

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double n = 0, d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    n += (a[i] - b[i]) * double(a[i] - b[i]);
    d += double(b[i]) * b[i];
  }
  return std::sqrt(n / d);
}

template <typename E>
std::vector<float> floats(const std::vector<E>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = to_f32(x[i]);
  return out;
}

template <typename E>
int run(int argc, char** argv) {
  const int64_t batch = 2, seq = atoi(argv[1]), nk = argc > 6 ? atoi(argv[6]) : 1, nv = 2 * nk, dk = atoi(argv[2]),
                dv = atoi(argv[3]), pad = 9, segment = atoi(argv[4]);
  DeltaRuleShape sh;
  sh.batch = batch;
  sh.seq = seq;
  sh.n_k_heads = nk;
  sh.n_v_heads = nv;
  sh.k_head_dim = dk;
  sh.v_head_dim = dv;
  std::vector<int32_t> lens(batch, static_cast<int32_t>(seq));
  lens.back() = static_cast<int32_t>(seq - pad);
  const int64_t T_ = batch * seq;
  std::vector<int32_t> segs(T_);
  for (int64_t t = 0; t < T_; ++t) segs[t] = static_cast<int32_t>(segment ? t / segment : 0);
  sh.seq_lens = lens.data();
  sh.segments = segment ? segs.data() : nullptr;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> U(-1, 1);
  std::vector<E> qkv(T_ * sh.row()), d_o(T_ * sh.value_dim());
  for (auto& x : qkv) x = from_f32<E>(U(rng));
  for (auto& x : d_o) x = from_f32<E>(U(rng));
  std::vector<float> g(T_ * nv), beta(T_ * nv);
  for (auto& x : g) x = -0.02f - 0.3f * std::abs(U(rng));
  for (auto& x : beta) x = 1.f / (1.f + std::exp(-U(rng)));

  // The forward and the backward in their own scratch (NaN, as the allocations are undefined), as the launchers do.
  const float nan = std::nanf("");
  const auto scratch_of = [&](bool backward) {
    std::vector<char> bytes(delta_rule_chunked_layout(sh, sizeof(E), backward).bytes);
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) std::memcpy(&bytes[i], &nan, 4);
    return bytes;
  };
  const DeltaRuleChunkedLayout l = delta_rule_chunked_layout(sh, sizeof(E), true);
  const Geo G = geometry(sh, l.chunks);
  std::vector<char> scratch_f = scratch_of(false), scratch = scratch_of(true);
  const Bufs<E> s_f = carve<E>(scratch_f.data(), delta_rule_chunked_layout(sh, sizeof(E), false), false);
  const Bufs<E> s = carve<E>(scratch.data(), l, true);
  std::vector<E> o(T_ * sh.value_dim(), from_f32<E>(nan)), dq(T_ * sh.row(), from_f32<E>(nan));
  std::vector<float> dg(T_ * nv, 0.f), db(T_ * nv, 0.f);  // the launcher's memsets (d_qkv has none)
  const int64_t items = T_ * nk;
  const auto heads = static_cast<unsigned>(batch * nv * G.chunks),
             tiles = static_cast<unsigned>(batch * nv * ((G.dvp + state_cols - 1) / state_cols));
  const auto rows = static_cast<unsigned>((items + threads / 32 - 1) / (threads / 32));
  const auto forward_states = [&](E* out, const Bufs<E>& b) {
    emu_launch(rows, threads, 0, [&] { normalize_kernel<E>(b.qn, b.kn, qkv.data(), G, items); });
    const PrepSmem<E> P(G);
    emu_launch(heads, threads, P.bytes, [&] { prep_kernel<E>(b, qkv.data(), g.data(), beta.data(), G, P); });
    const StateSmem<E> S(G);
    emu_launch(tiles, threads, S.bytes, [&] { state_kernel<E>(out, b, g.data(), beta.data(), G, S); });
  };
  forward_states(o.data(), s_f);
  forward_states(nullptr, s);
  const StateGradSmem<E> SG(G);
  emu_launch(tiles, threads, SG.bytes, [&] { state_grad_kernel<E>(s, d_o.data(), g.data(), beta.data(), G, SG); });
  const ChunkGradSmem<E> CG(G);
  emu_launch(heads, grad_threads, CG.bytes, [&] {
    chunk_grad_kernel<E>(dq.data(), dg.data(), db.data(), s, d_o.data(), qkv.data(), g.data(), beta.data(), G, CG);
  });
  emu_launch(rows, threads, 0, [&] { qk_sum_kernel<E>(dq.data(), s, qkv.data(), G, items); });

  const std::vector<float> qkv_f = floats(qkv), d_o_f = floats(d_o);
  std::vector<float> o_ref(o.size()), dq_ref(dq.size()), dg_ref(dg.size()), db_ref(db.size());
  cpu::gated_delta_rule_forward(o_ref.data(), qkv_f.data(), g.data(), beta.data(), sh);
  cpu::gated_delta_rule_backward(dq_ref.data(), dg_ref.data(), db_ref.data(), d_o_f.data(), qkv_f.data(), g.data(),
                                 beta.data(), sh);
  std::printf("%s seq %ld dims %ld/%ld heads %ld/%ld segment %ld: o %.3g d_qkv %.3g dg %.3g dbeta %.3g\n",
              sizeof(E) == 4 ? "fp32" : "bf16", static_cast<long>(seq), static_cast<long>(dk), static_cast<long>(dv),
              static_cast<long>(nk), static_cast<long>(nv), static_cast<long>(segment), rel(floats(o), o_ref),
              rel(floats(dq), dq_ref), rel(dg, dg_ref), rel(db, db_ref));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: %s SEQ K_HEAD_DIM V_HEAD_DIM SEGMENT f|b [K_HEADS]\n", argv[0]);
    return 2;
  }
  return argv[5][0] == 'b' ? run<__nv_bfloat16>(argc, argv) : run<float>(argc, argv);
}
