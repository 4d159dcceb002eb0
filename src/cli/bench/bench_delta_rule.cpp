// `megatrain bench-delta-rule` (see bench_delta_rule.h).
#include "cli/bench/bench_delta_rule.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "backend/gated_delta_rule_scratch.h"
#include "cli/runtime/backend_select.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "core/median.h"
#include "core/runtime_switches.h"
#include "engine/deltanet_block.h"
#include "model/model_source.h"

namespace mt {
namespace {

// Device buffer of n random values in [lo, hi) as `dtype`, owned by the backend until freed.
void* random_buffer(Backend& be, DType dtype, int64_t n, float lo, float hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  void* p = be.alloc_bytes(n * static_cast<int64_t>(dtype_size(dtype)));
  if (dtype == DType::f32) {
    std::vector<float> host(static_cast<size_t>(n));
    for (float& x : host) x = dist(rng);
    be.upload(p, host.data(), n * 4);
  } else {
    std::vector<std::uint16_t> host(static_cast<size_t>(n));
    for (std::uint16_t& x : host) x = f32_to_bf16(dist(rng));
    be.upload(p, host.data(), n * 2);
  }
  return p;
}

// Matrix-product FLOPs of the chunked form per (sequence, v head, chunk of C tokens), forward and backward (which
// runs the forward's stages again).
struct ChunkFlops {
  double forward, backward;
};
ChunkFlops chunk_flops(const DeltaRuleShape& s, int64_t C) {
  const double c = static_cast<double>(C), dk = static_cast<double>(s.k_head_dim),
               dv = static_cast<double>(s.v_head_dim);
  const double cc_k = 2 * c * c * dk, cc_v = 2 * c * c * dv, c_kv = 2 * c * dk * dv;
  const double states = 2 * cc_k + cc_v + 2 * c_kv;         // K̂K̂ᵀ, U, W, W·S, the state update
  const double forward = states + cc_k + cc_v + c_kv;        // + Q̂K̂ᵀ and the output
  const double state_grad = cc_k + cc_v + 3 * c_kv;
  const double qk_grad = cc_v + 3 * cc_k + 3 * c_kv;
  const double wy_grad = 2 * cc_v + 5 * cc_k;
  return {forward, states + state_grad + qk_grad + wy_grad};
}

// The kernel the backend runs for s (the CUDA backend's choice by the delta_rule switch).
std::string kernel_name(const Backend& be, const DeltaRuleShape& s, const RuntimeSwitches& switches) {
  if (be.host_memory() || !delta_rule_chunked_supports(s)) return "recurrent";
  return switches.delta_rule == DeltaRuleChoice::recurrent ? "recurrent" : "chunked";
}

}  // namespace

void run_bench_delta_rule(const BenchDeltaRuleOptions& o) {
  const ModelSource source = resolve_model_source(o.model);
  const ModelSpec spec = load_model_spec(source.config_json, true);
  const auto is_linear = [](const LayerSpec& l) { return l.is_deltanet(); };
  const auto layer = std::find_if(spec.layers.begin(), spec.layers.end(), is_linear);
  MT_REQUIRE(layer != spec.layers.end(), "bench-delta-rule: {}: no linear-attention layer (layer_types)",
             source.config_json.string());
  const auto linear_layers = std::count_if(spec.layers.begin(), spec.layers.end(), is_linear);
  const DeltaNetSpec& d = layer->deltanet;
  const DType dtype = dtype_from_name(o.dtype);
  const RuntimeSwitches switches = environment_switches();  // no config: the variables alone, once
  const std::unique_ptr<Backend> be = select_backend(dtype, 0, switches);
  DeltaRuleShape s = delta_rule_shape(d, o.batch, o.seq);
  const DType act = be->dtype();
  const int64_t T = s.batch * s.seq;
  void* qkv = random_buffer(*be, act, T * s.row(), -1.f, 1.f, 1);
  void* d_o = random_buffer(*be, act, T * s.value_dim(), -1.f, 1.f, 2);
  auto* g = static_cast<float*>(random_buffer(*be, DType::f32, T * s.n_v_heads, -0.5f, -0.02f, 3));
  auto* beta = static_cast<float*>(random_buffer(*be, DType::f32, T * s.n_v_heads, 0.05f, 0.95f, 4));
  void* o_buf = be->alloc(T * s.value_dim());
  void* d_qkv = be->alloc(T * s.row());
  float* dg = be->alloc_reals(T * s.n_v_heads);
  float* dbeta = be->alloc_reals(T * s.n_v_heads);
  using clock = std::chrono::steady_clock;
  const auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  std::vector<double> fwd, bwd;
  for (int64_t step = 0; step < o.warmup + o.steps; ++step) {
    be->synchronize();
    const auto t0 = clock::now();
    be->gated_delta_rule_forward(o_buf, qkv, g, beta, s);
    be->synchronize();
    const auto t1 = clock::now();
    be->gated_delta_rule_backward(d_qkv, dg, dbeta, d_o, qkv, g, beta, s);
    be->synchronize();
    const auto t2 = clock::now();
    if (step >= o.warmup) {
      fwd.push_back(seconds(t0, t1));
      bwd.push_back(seconds(t1, t2));
    }
  }
  for (void* p : {qkv, d_o, static_cast<void*>(g), static_cast<void*>(beta), o_buf, d_qkv, static_cast<void*>(dg),
                  static_cast<void*>(dbeta)})
    be->free_bytes(p);
  const double f = median(fwd), b = median(bwd);
  const int64_t C = delta_rule_chunk(dtype_size(act));
  const ChunkFlops flops = chunk_flops(s, C);
  const double chunks = static_cast<double>(s.batch * s.n_v_heads * ((s.seq + C - 1) / C));
  const std::string kernel = kernel_name(*be, s, switches);
  const nlohmann::json result = {{"backend", be->name()}, {"dtype", dtype_name(act)}, {"kernel", kernel},
                                 {"batch", s.batch}, {"seq", s.seq}, {"k_heads", s.n_k_heads},
                                 {"v_heads", s.n_v_heads}, {"k_head_dim", s.k_head_dim},
                                 {"v_head_dim", s.v_head_dim}, {"linear_layers", linear_layers},
                                 {"forward_s", f}, {"backward_s", b}, {"total_s", f + b},
                                 {"forward_tflops", chunks * flops.forward / f / 1e12},
                                 {"backward_tflops", chunks * flops.backward / b / 1e12}};
  if (o.json) {
    std::printf("%s\n", result.dump().c_str());
    return;
  }
  log::info("bench-delta-rule: {} {} ({} kernel), {} x {} tokens, {}/{} heads x {}/{}, median of {} calls", be->name(),
            dtype_name(act), kernel, s.batch, s.seq, s.n_k_heads, s.n_v_heads, s.k_head_dim, s.v_head_dim, o.steps);
  log::info("  forward  {:9.3f} ms  {:6.1f} TFLOP/s (chunked form's products)", f * 1e3, chunks * flops.forward / f / 1e12);
  log::info("  backward {:9.3f} ms  {:6.1f} TFLOP/s", b * 1e3, chunks * flops.backward / b / 1e12);
  log::info("  total    {:9.3f} ms per layer, {:.1f} ms for the model's {} linear-attention layers", (f + b) * 1e3,
            (f + b) * 1e3 * static_cast<double>(linear_layers), linear_layers);
}

}  // namespace mt
