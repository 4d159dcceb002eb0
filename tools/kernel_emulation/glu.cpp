// Runs kernels/ops/glu.cu's and clamped_swiglu.cu's kernels on the CPU (emu_cuda.h; the kernel sources with their
// launches turned into emu_launch, which run_glu.sh writes) through their launchers, forward, backward and (glu) the
// backward that also writes y, and compares every element of every output allocation with the CPU backend's reference
// on the same layout: written elements in ulps of the element type (after rounding the fp32 reference once), all others
// (columns between cols and ld that the call must not write, 16-element guards before and after) bit for bit their
// initial NaN sentinels. Also checks each launch took the path the launcher's rule picks: 16-byte vectors where every
// pointer is 16-byte aligned and N (elements per 16 bytes) divides cols and ld, or rows × cols where ld = cols.
// Usage: glu f|b ROWS COLS LAYOUT OP   (f: fp32, b: bf16, inputs rounded)
//   LAYOUT dense: ld = cols, g, u, dg, du separate; fused: ld = 2·cols, u = g + cols, du = dg + cols (one [g | u]
//   buffer each way); padK: ld = cols + K, separate; shift: dense with every pointer one element past 16-byte
//   alignment.
//   OP silu, gelu (gelu_tanh), silu-up0, gelu-up0 (u and du null), clamped (GPT-OSS's, alpha 1.702, limit 7).
// Exit status 1 where fp32 differs at all or bf16 by more than one ulp, an untouched element changed, or a path
// differs.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "backend/cpu/cpu_ops.h"
#include "emu_compare.h"
#include "kernels_emu.h"

using namespace mt;
using namespace mt::cuda;

namespace {

constexpr int64_t guard = 16;  // elements before and after every allocation (keeps 16-byte alignment)

// One allocation of `body` elements between guards, 64-byte aligned, every element a distinct NaN sentinel; the
// regions (offset, rows, cols, ld) a call writes; its fp32 twin for the reference.
template <typename E>
struct Buf {
  int64_t body;
  std::vector<E> init;
  E* mem;
  E* p;  // body start
  std::vector<float> ref;
  struct Region {
    int64_t off, rows, cols, ld;
  };
  std::vector<Region> written;
  explicit Buf(int64_t n) : body(n), init(n + 2 * guard) {
    for (int64_t k = 0; k < static_cast<int64_t>(init.size()); ++k) init[k] = sentinel<E>(k);
    mem = static_cast<E*>(std::aligned_alloc(64, (init.size() * sizeof(E) + 63) / 64 * 64));
    p = mem + guard;
    reset();
  }
  ~Buf() { std::free(mem); }
  Buf(const Buf&) = delete;
  void reset() {
    std::memcpy(mem, init.data(), init.size() * sizeof(E));
    ref.resize(init.size());
    for (size_t k = 0; k < init.size(); ++k) ref[k] = to_f32(init[k]);
    written.clear();
  }
  void fill(int64_t rows, int64_t cols, int64_t ld, std::mt19937& rng, float lo, float hi, float exact = 0.f) {
    std::uniform_real_distribution<float> U(lo, hi);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t k = guard + r * ld + c;
        float x = U(rng);
        if (exact != 0.f && k % 7 == 0) x = k % 14 ? exact : -exact;  // the clamps' bounds themselves
        init[k] = from_f32<E>(x);
      }
    reset();
  }
  float* r() { return ref.data() + guard; }
  bool is_written(int64_t k) const {  // k relative to p
    for (const Region& g : written) {
      const int64_t o = k - g.off;
      if (o >= 0 && o / g.ld < g.rows && o % g.ld < g.cols) return true;
    }
    return false;
  }
};

struct Result {
  int64_t ulp = 0;
  double abs = 0;
  int64_t changed = 0;  // elements outside the written regions that differ from their sentinel
};

// Compares buffer b (the kernel's) with its reference at written elements and with its sentinels elsewhere.
template <typename E>
Result compare(const Buf<E>& b) {
  Result res;
  for (int64_t k = -guard; k < b.body + guard; ++k) {
    const E got = b.p[k];
    if (b.is_written(k)) {
      const E want = from_f32<E>(b.ref[guard + k]);
      res.ulp = std::max(res.ulp, ulps(got, want));
      const double d = std::fabs(double(to_f32(got)) - to_f32(want));
      res.abs = std::max(res.abs, std::isnan(d) ? INFINITY : d);
    } else if (bits(got) != bits(b.init[guard + k])) {
      ++res.changed;
    }
  }
  return res;
}

template <typename E>
bool is_vec_path(const std::string& launched) {
  return launched.find(", 1,") == std::string::npos && launched.find("<T>") == std::string::npos;
}

template <typename E>
int run(int64_t rows, int64_t cols, const std::string& layout, const std::string& op) {
  const bool fused = layout == "fused", shift = layout == "shift", clamped = op == "clamped";
  const bool gated = op.find("up0") == std::string::npos;
  const Activation act = op.rfind("gelu", 0) == 0 ? Activation::gelu_tanh : Activation::silu;
  const int64_t ld = fused ? 2 * cols : layout.rfind("pad", 0) == 0 ? cols + std::stoll(layout.substr(3)) : cols;
  const int64_t n = rows * cols, s = shift ? 1 : 0;  // s: elements past alignment
  const int64_t strided = rows * ld + s, dense = n + s;
  std::mt19937 rng(7);
  // g and u (one [g | u] buffer where fused), dy; outputs y, dg, du (one buffer where fused), y of the backward.
  Buf<E> g(strided), u_sep(fused ? 0 : strided), dy(dense), y(dense), y2(dense), dg(strided),
      du_sep(fused ? 0 : strided);
  const float lo = clamped ? -10.f : -8.f, hi = clamped ? 10.f : 8.f, exact = clamped ? 7.f : 0.f;
  g.fill(rows, cols, ld, rng, lo, hi, exact);  // element s..: shifted by s below
  if (fused) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        std::uniform_real_distribution<float> U(clamped ? -10.f : -2.f, clamped ? 10.f : 2.f);
        const int64_t k = guard + r * ld + cols + c;
        g.init[k] = from_f32<E>(clamped && k % 5 == 0 ? (k % 10 ? 7.f : -7.f) : U(rng));
      }
    g.reset();
  } else {
    u_sep.fill(rows, cols, ld, rng, clamped ? -10.f : -2.f, clamped ? 10.f : 2.f, exact);
  }
  dy.fill(1, n, n, rng, -1.f, 1.f);
  // With shift every pointer starts one element in: move the filled contents along by one.
  auto shifted = [&](Buf<E>& b) {
    if (!s || b.body == 0) return;
    for (int64_t k = b.body + guard - 1; k > guard; --k) b.init[k] = b.init[k - 1];
    b.init[guard] = sentinel<E>(12345);
    b.reset();
  };
  shifted(g);
  shifted(u_sep);
  shifted(dy);
  E* gp = g.p + s;
  E* up = !gated ? nullptr : fused ? gp + cols : u_sep.p + s;
  float* gr = g.r() + s;
  float* ur = !gated ? nullptr : fused ? gr + cols : u_sep.r() + s;
  constexpr int N = vec16<E>;
  const bool aligned = !shift;
  const bool want_vec =
      !clamped && aligned && (ld == cols ? n % N == 0 : cols % N == 0 && ld % N == 0);
  bool ok = true;
  std::string paths;
  auto path_check = [&](const char* what) {
    for (const std::string& k : emu_launched) {
      const bool vec = is_vec_path<E>(k);
      paths += std::string(" ") + what + ":" + (vec ? "vec" + std::to_string(N) : "scalar");
      if (vec != want_vec) {
        paths += "(WRONG PATH)";
        ok = false;
      }
    }
    emu_launched.clear();
  };
  const int64_t tol = sizeof(E) == 4 ? 0 : 1;
  std::string report;
  auto note = [&](const char* what, const Buf<E>& b) {
    const Result r = compare(b);
    char line[160];
    std::snprintf(line, sizeof line, " %s %lld ulp (%.2g)%s", what, static_cast<long long>(r.ulp), r.abs,
                  r.changed ? " UNTOUCHED CHANGED" : "");
    report += line;
    if (r.ulp > tol || r.changed) {
      ok = false;
      if (r.changed) report += "[" + std::to_string(r.changed) + "]";
    }
  };
  const float alpha = 1.702f, limit = 7.f;
  E* dgp = dg.p + s;
  E* dup = !gated ? nullptr : fused ? dgp + cols : du_sep.p + s;
  float* dgr = dg.r() + s;
  float* dur = !gated ? nullptr : fused ? dgr + cols : du_sep.r() + s;
  Buf<E>& du_buf = fused ? dg : du_sep;
  auto mark_grads = [&] {
    dg.written = {{s, rows, cols, ld}};
    if (gated) du_buf.written.push_back({s + (fused ? cols : 0), rows, cols, ld});
  };
  // Forward.
  y.written = {{s, 1, n, n}};
  if (clamped) {
    clamped_swiglu_forward<E>(y.p + s, gp, up, rows, cols, ld, alpha, limit, nullptr);
    cpu::clamped_swiglu_forward(y.r() + s, gr, ur, rows, cols, ld, alpha, limit);
  } else {
    glu_forward<E>(y.p + s, gp, up, rows, cols, ld, act, nullptr);
    cpu::glu_forward(y.r() + s, gr, ur, rows, cols, ld, act);
  }
  path_check("fwd");
  note("fwd y", y);
  // Backward without y.
  mark_grads();
  if (clamped) {
    clamped_swiglu_backward<E>(dgp, dup, dy.p + s, gp, up, rows, cols, ld, alpha, limit, nullptr);
    cpu::clamped_swiglu_backward(dgr, dur, dy.r() + s, gr, ur, rows, cols, ld, alpha, limit);
  } else {
    glu_backward<E>(dgp, dup, nullptr, dy.p + s, gp, up, rows, cols, ld, act, nullptr);
    cpu::glu_backward(dgr, dur, nullptr, dy.r() + s, gr, ur, rows, cols, ld, act);
  }
  path_check("bwd");
  note("| bwd dg", dg);
  if (gated && !fused) note("du", du_sep);
  // Backward with y (glu): the same gradients, y the forward's bits.
  if (!clamped) {
    dg.reset();
    du_sep.reset();
    mark_grads();
    y2.written = {{s, 1, n, n}};
    glu_backward<E>(dgp, dup, y2.p + s, dy.p + s, gp, up, rows, cols, ld, act, nullptr);
    cpu::glu_backward(dgr, dur, y2.r() + s, dy.r() + s, gr, ur, rows, cols, ld, act);
    path_check("bwd+y");
    note("| bwd+y dg", dg);
    if (gated && !fused) note("du", du_sep);
    note("y", y2);
    const bool same = std::memcmp(y.mem, y2.mem, y.init.size() * sizeof(E)) == 0;
    report += same ? " (= fwd's bits)" : " (NOT fwd's bits)";
    ok = ok && same;
  }
  std::printf("%s %s %-6s rows %lld cols %lld ld %lld:%s |%s%s\n", sizeof(E) == 4 ? "fp32" : "bf16", op.c_str(),
              layout.c_str(), static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(ld),
              paths.c_str(), report.c_str(), ok ? "" : "  FAIL");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s f|b ROWS COLS dense|fused|padK|shift silu|gelu|silu-up0|gelu-up0|clamped\n",
                 argv[0]);
    return 2;
  }
  const int64_t rows = atoll(argv[2]), cols = atoll(argv[3]);
  return argv[1][0] == 'b' ? run<__nv_bfloat16>(rows, cols, argv[4], argv[5])
                            : run<float>(rows, cols, argv[4], argv[5]);
}
