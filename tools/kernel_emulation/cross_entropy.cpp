// Runs kernels/ops/cross_entropy.cu's kernel on the CPU (emu_cuda.h; the kernel source with its launches turned into
// emu_launch, which run_cross_entropy.sh writes) beside the version of the file run_cross_entropy.sh was given as
// the reference (namespace mt::cuda_ref), and compares: rows ld elements apart against the reference on the same
// rows packed (ld = V): bit for bit where ld = V, within a few ulps where ld pads V; every column from V to ld and
// 16-element guards before and after each buffer untouched (NaN sentinels); the loss within 1e-5 of an fp64 one; the
// launch on the path the launcher's rule picks (4 wide where ld is a multiple of 4 and the pointers are aligned).
// Usage: cross_entropy f|b ROWS V LD SOFTCAP [shift]   (f: fp32 dlogits, b: bf16; shift: logits one element past
// 16-byte alignment). Exit status 1 on any difference past those bounds.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "emu_compare.h"
#include "kernels_emu.h"

using namespace mt::cuda;

namespace {

constexpr int64_t guard = 16;

template <typename E>
int run(int64_t rows, int64_t V, int64_t ld, float softcap, bool shift) {
  const float scale = 0.37f;
  const int64_t s = shift ? 1 : 0;
  std::mt19937 rng(11);
  std::normal_distribution<float> N(0.f, softcap > 0.f ? 12.f : 4.f);
  // Logits: guard, s, rows × ld (columns past V NaN), guard; the reference's rows packed.
  std::vector<float> logits(2 * guard + s + rows * ld, std::nanf("")), packed(rows * V);
  std::vector<int32_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < V; ++c) packed[r * V + c] = logits[guard + s + r * ld + c] = N(rng);
    targets[r] = r % 3 == 1 ? -100 : static_cast<int32_t>(rng() % V);
  }
  std::vector<E> dl(2 * guard + rows * ld, sentinel<E>(1)), dl_ref(rows * V, sentinel<E>(1));
  std::vector<float> loss(rows, std::nanf("")), loss_ref(rows, std::nanf(""));
  emu_launched.clear();
  cross_entropy<E>(dl.data() + guard, loss.data(), logits.data() + guard + s, targets.data(), nullptr, rows, V, ld, scale,
                   softcap, nullptr);
  const std::string path = emu_launched.at(0);
  mt::cuda_ref::cross_entropy<E>(dl_ref.data(), loss_ref.data(), packed.data(), targets.data(), nullptr, rows, V,
                                 scale, softcap, nullptr);
  int64_t worst = 0, untouched_changed = 0, loss_worst_bits = 0;
  double loss_err = 0;
  for (int64_t k = 0; k < static_cast<int64_t>(dl.size()); ++k) {
    const int64_t body = k - guard, r = body / ld, c = body % ld;
    if (body >= 0 && r < rows && c < V) {
      worst = std::max(worst, ulps(dl[k], dl_ref[r * V + c]));
    } else if (bits(dl[k]) != bits(sentinel<E>(1))) {
      ++untouched_changed;
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    loss_worst_bits = std::max(loss_worst_bits, ulps(loss[r], loss_ref[r]));
    if (targets[r] == -100) continue;
    double m = -INFINITY, sum = 0;
    const auto z = [&](int64_t c) {
      const double x = packed[r * V + c];
      return softcap > 0.f ? softcap * std::tanh(x / softcap) : x;
    };
    for (int64_t c = 0; c < V; ++c) m = std::max(m, z(c));
    for (int64_t c = 0; c < V; ++c) sum += std::exp(z(c) - m);
    const double want = m + std::log(sum) - z(targets[r]);
    loss_err = std::max(loss_err, std::fabs(loss[r] - want) / std::max(1.0, std::fabs(want)));
  }
  const bool vector_path = path.find("<T, N,") != std::string::npos;  // the launch site of the 4-wide path
  const bool want_vector = ld % 4 == 0 && !shift;
  const int64_t ulp_bound = ld == V ? 0 : sizeof(E) == 4 ? 16 : 1;
  const bool ok = worst <= ulp_bound && (ld == V ? loss_worst_bits == 0 : true) && loss_err <= 1e-5 &&
                  untouched_changed == 0 && vector_path == want_vector;
  std::printf("%s %s rows %lld V %lld ld %lld softcap %g%s: %s; dlogits within %lld ulp of the reference's (bound %lld), "
              "loss %lld ulp, %.1e from fp64; %lld untouched elements changed\n",
              ok ? "ok  " : "FAIL", sizeof(E) == 4 ? "fp32" : "bf16", static_cast<long long>(rows),
              static_cast<long long>(V), static_cast<long long>(ld), softcap, shift ? " shifted" : "", path.c_str(),
              static_cast<long long>(worst), static_cast<long long>(ulp_bound),
              static_cast<long long>(loss_worst_bits), loss_err, static_cast<long long>(untouched_changed));
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s f|b ROWS V LD SOFTCAP [shift]\n", argv[0]);
    return 2;
  }
  const int64_t rows = std::atoll(argv[2]), V = std::atoll(argv[3]), ld = std::atoll(argv[4]);
  const float cap = std::strtof(argv[5], nullptr);
  const bool shift = argc > 6 && std::string(argv[6]) == "shift";
  return argv[1][0] == 'f' ? run<float>(rows, V, ld, cap, shift) : run<__nv_bfloat16>(rows, V, ld, cap, shift);
}
