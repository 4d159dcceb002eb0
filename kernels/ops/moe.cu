// Mixture-of-experts kernels (semantics in backend.h): the softmax routers (GPT-OSS: softmax of the top logits; one
// warp per token up to 256 experts and top 32) and the sigmoid group-limited top-k router (one thread per token),
// their backward (one thread per token), the load-balancing statistics, the stable grouping of routed rows by expert
// (one block per expert scans the routed rows in order with a block prefix sum), gather / combine and their
// backwards (one block per token, the token's k rows summed in slot order; the combine's weights one block per
// grouped row), and the sigmoid-gated add.
// Invariant: no floating-point atomics; every sum runs in a fixed order (integer atomics only for the counts), so
// results are deterministic and match the CPU reference's order of routing decisions.
#include <climits>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/ops/device_util.cuh"
#include "kernels/ops/kernels.h"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
namespace {

constexpr int threads = 256;

__device__ __forceinline__ bool valid_token(const int32_t* seq_lens, int64_t seq, int64_t t) {
  return seq_lens == nullptr || t % seq < seq_lens[t / seq];
}

// The router's fields a kernel needs (MoeRouting without the pointer's type).
struct Routing {
  int E, k, groups, topk_groups;
  bool sigmoid, norm_topk;
  float scaling;
  bool topk_softmax;
};
Routing routing_of(const MoeRouting& r) {
  return {static_cast<int>(r.experts), static_cast<int>(r.top_k), static_cast<int>(r.groups),
          static_cast<int>(r.topk_groups), r.sigmoid, r.norm_topk, r.scaling, r.topk_softmax};
}
constexpr int max_groups = 64;

template <typename T>
__global__ void route_forward_kernel(float* probs, int32_t* idx, float* weights, const T* logits, const T* bias,
                                     int64_t tokens, Routing r) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  const int E = r.E, k = r.k;
  const T* l = logits + t * E;
  float* p = probs + t * E;
  int32_t* ix = idx + t * k;
  float* w = weights + t * k;
  int chosen[max_groups];
  const int per = E / r.groups;
  if (r.sigmoid) {
    for (int e = 0; e < E; ++e) p[e] = 1.f / (1.f + expf(-to_f32(l[e])));
  } else {
    float m = to_f32(l[0]);
    for (int e = 1; e < E; ++e) m = fmaxf(m, to_f32(l[e]));
    float sum = 0.f;
    for (int e = 0; e < E; ++e) {
      p[e] = expf(to_f32(l[e]) - m);
      sum += p[e];
    }
    for (int e = 0; e < E; ++e) p[e] /= sum;
  }
  auto score = [&](int e) {
    if (r.topk_softmax) return to_f32(l[e]);  // GPT-OSS picks by the logits
    return r.sigmoid && bias != nullptr ? p[e] + to_f32(bias[e]) : p[e];
  };
  const bool grouped = r.sigmoid || r.groups > 1;
  if (grouped) {  // the topk_groups best groups (ties to the lower group): sigmoid, by the sum of their two best
                  // biased scores; softmax (DeepSeek-V2), by their largest probability
    auto group_score = [&](int g) {
      float a = -INFINITY, b = -INFINITY;
      for (int e = g * per; e < (g + 1) * per; ++e) {
        const float v = score(e);
        if (v > a) {
          b = a;
          a = v;
        } else if (v > b) {
          b = v;
        }
      }
      return r.sigmoid && per > 1 ? a + b : a;
    };
    for (int j = 0; j < r.topk_groups; ++j) {
      int best = -1;
      float best_score = 0.f;
      for (int g = 0; g < r.groups; ++g) {
        bool taken = false;
        for (int i = 0; i < j; ++i) taken = taken || chosen[i] == g;
        if (taken) continue;
        const float gs = group_score(g);
        if (best < 0 || gs > best_score) best = g, best_score = gs;
      }
      chosen[j] = best;
    }
  }
  auto allowed = [&](int e) {
    if (!grouped) return true;
    for (int i = 0; i < r.topk_groups; ++i)
      if (e / per == chosen[i]) return true;
    return false;
  };
  float selected = 0.f;
  for (int j = 0; j < k; ++j) {  // the first maximum among allowed experts not yet taken
    int best = -1;
    for (int e = 0; e < E; ++e) {
      bool used = !allowed(e);
      for (int i = 0; i < j; ++i) used = used || ix[i] == e;
      if (!used && (best < 0 || score(e) > score(best))) best = e;
    }
    ix[j] = best;
    w[j] = p[best];
    selected += w[j];
  }
  if (r.topk_softmax) {  // the softmax of the k selected logits
    const float top = to_f32(l[ix[0]]);
    float sum = 0.f;
    for (int j = 0; j < k; ++j) {
      w[j] = expf(to_f32(l[ix[j]]) - top);
      sum += w[j];
    }
    for (int j = 0; j < k; ++j) w[j] /= sum;
  } else if (r.sigmoid) {
    for (int j = 0; j < k; ++j) w[j] = (r.norm_topk ? w[j] / (selected + 1e-20f) : w[j]) * r.scaling;
  } else {
    if (r.norm_topk)
      for (int j = 0; j < k; ++j) w[j] /= selected;
    for (int j = 0; j < k; ++j) w[j] *= r.scaling;
  }
}

// The softmax routers (Mixtral / Qwen: top k of the softmax, optionally renormalised; GPT-OSS: top k logits, softmax
// over them), one warp per token: lane l holds experts l, l + 32, ... (V of them) in registers, the softmax's max and
// sum are warp reductions (every lane the same bits), and each of the k picks is a warp argmax taking the first
// maximum (the lowest expert among equal scores), as the CPU's scan in expert order does. The k picks go through
// shared memory so that lane 0 normalises them in slot order.
constexpr int max_top_k = 32;
template <typename T, int V>
__global__ void route_softmax_kernel(float* probs, int32_t* idx, float* weights, const T* logits, int64_t tokens,
                                     Routing r) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t t = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (t >= tokens) return;  // whole warps
  const int E = r.E, k = r.k;
  __shared__ int32_t pick[threads / 32][max_top_k];
  __shared__ float pick_p[threads / 32][max_top_k], pick_l[threads / 32][max_top_k];
  float l[V], p[V];
  float m = -INFINITY;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int e = lane + 32 * v;
    l[v] = e < E ? to_f32(logits[t * E + e]) : -INFINITY;
    m = fmaxf(m, l[v]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float sum = 0.f;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    p[v] = lane + 32 * v < E ? expf(l[v] - m) : 0.f;
    sum += p[v];
  }
  sum = warp_sum(sum);
#pragma unroll
  for (int v = 0; v < V; ++v) {
    p[v] /= sum;
    if (lane + 32 * v < E) probs[t * E + lane + 32 * v] = p[v];
  }
  unsigned taken = 0;  // bit v: expert lane + 32·v picked
  for (int j = 0; j < k; ++j) {
    int best = INT_MAX;  // this lane's first maximum among the experts not yet taken
    float best_score = 0.f;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const float sc = r.topk_softmax ? l[v] : p[v];
      if (lane + 32 * v < E && !(taken >> v & 1u) && (best == INT_MAX || sc > best_score)) {
        best = lane + 32 * v;
        best_score = sc;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const int other = __shfl_xor_sync(0xffffffffu, best, o);
      const float other_score = __shfl_xor_sync(0xffffffffu, best_score, o);
      if (other != INT_MAX &&
          (best == INT_MAX || other_score > best_score || (other_score == best_score && other < best))) {
        best = other;
        best_score = other_score;
      }
    }
    if (best % 32 == lane) {
      const int v = best / 32;
      taken |= 1u << v;
#pragma unroll
      for (int u = 0; u < V; ++u)
        if (u == v) {
          pick_p[warp][j] = p[u];
          pick_l[warp][j] = l[u];
        }
      pick[warp][j] = best;
    }
  }
  __syncwarp();
  if (lane != 0) return;
  int32_t* ix = idx + t * k;
  float* w = weights + t * k;
  if (r.topk_softmax) {  // the softmax of the k selected logits
    const float top = pick_l[warp][0];
    float s = 0.f;
    for (int j = 0; j < k; ++j) {
      w[j] = expf(pick_l[warp][j] - top);
      s += w[j];
    }
    for (int j = 0; j < k; ++j) w[j] /= s;
  } else {
    float selected = 0.f;
    for (int j = 0; j < k; ++j) {
      w[j] = pick_p[warp][j];
      selected += w[j];
    }
    if (r.norm_topk)
      for (int j = 0; j < k; ++j) w[j] /= selected;
    for (int j = 0; j < k; ++j) w[j] *= r.scaling;
  }
  for (int j = 0; j < k; ++j) ix[j] = pick[warp][j];
}

template <typename T>
__global__ void route_backward_kernel(T* d_logits, const float* d_weights, const float* probs, const int32_t* idx,
                                      const float* weights, const float* aux_grad, const int32_t* seq_lens,
                                      int64_t seq, int64_t tokens, Routing r) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  const int E = r.E, k = r.k;
  const bool norm_topk = r.norm_topk;
  const float* p = probs + t * E;
  const float* w = weights + t * k;
  const float* dw = d_weights + t * k;
  const int32_t* ix = idx + t * k;
  const bool aux = aux_grad != nullptr && valid_token(seq_lens, seq, t);
  if (r.topk_softmax) {  // the aux loss through the full softmax p; the weights, a softmax of the k selected logits
    float pdp = 0.f, inner = 0.f;
    if (aux)
      for (int e = 0; e < E; ++e) pdp += p[e] * aux_grad[e];
    for (int j = 0; j < k; ++j) inner += w[j] * dw[j];
    T* dl = d_logits + t * E;
    for (int e = 0; e < E; ++e) {
      float v = aux ? p[e] * (aux_grad[e] - pdp) : 0.f;
      for (int j = 0; j < k; ++j)
        if (ix[j] == e) v += w[j] * (dw[j] - inner);
      dl[e] = from_f32<T>(v);
    }
    return;
  }
  const float c = r.scaling;
  float inner = 0.f, selected = 0.f;
  if (norm_topk)
    for (int j = 0; j < k; ++j) {
      inner += dw[j] * w[j];
      selected += p[ix[j]];
    }
  if (r.sigmoid) selected += 1e-20f;
  // dp[e] = aux_grad[e] (valid tokens) + Σ_j [ix_j = e]·dv_j; pdp = Σ_e p_e·dp_e in expert order, as the CPU.
  auto dp = [&](int e) {
    float v = aux ? aux_grad[e] : 0.f;
    for (int j = 0; j < k; ++j)
      if (ix[j] == e) v += norm_topk ? c * (dw[j] - inner / c) / selected : c * dw[j];
    return v;
  };
  T* dl = d_logits + t * E;
  if (r.sigmoid) {
    for (int e = 0; e < E; ++e) dl[e] = from_f32<T>(p[e] * (1.f - p[e]) * dp(e));
    return;
  }
  float pdp = 0.f;
  for (int e = 0; e < E; ++e) pdp += p[e] * dp(e);
  for (int e = 0; e < E; ++e) dl[e] = from_f32<T>(p[e] * (dp(e) - pdp));
}

// Block e: counts[e] += routed valid rows to e (integer); prob_sums[e] += Σ_t probs[t, e] over valid tokens in a
// fixed reduction order.
__global__ void router_stats_kernel(int32_t* counts, float* prob_sums, const float* probs, const int32_t* idx,
                                    const int32_t* seq_lens, int64_t seq, int64_t tokens, int E, int k) {
  const int e = static_cast<int>(blockIdx.x);
  double p = 0;
  int c = 0;
  for (int64_t t = threadIdx.x; t < tokens; t += blockDim.x) {
    if (!valid_token(seq_lens, seq, t)) continue;
    p += probs[t * E + e];
    for (int j = 0; j < k; ++j) c += idx[t * k + j] == e;
  }
  using Reduce = cub::BlockReduce<double, threads>;
  using ReduceInt = cub::BlockReduce<int, threads>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ typename ReduceInt::TempStorage tmp_int;
  const double total = Reduce(tmp).Sum(p);
  const int count = ReduceInt(tmp_int).Sum(c);
  if (threadIdx.x == 0) {
    prob_sums[e] += static_cast<float>(total);
    counts[e] += count;
  }
}

// Block e: the routed rows r (token-major) with idx[r] == e, in order, at rows offsets[e].. (offsets from a
// count per expert and an exclusive scan).
__global__ void count_kernel(int32_t* counts, const int32_t* idx, int64_t rows) {
  const int e = static_cast<int>(blockIdx.x);
  int c = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) c += idx[r] == e;
  using ReduceInt = cub::BlockReduce<int, threads>;
  __shared__ typename ReduceInt::TempStorage tmp;
  const int total = ReduceInt(tmp).Sum(c);
  if (threadIdx.x == 0) counts[e + 1] = total;
}
__global__ void offsets_kernel(int32_t* offsets, int E) {
  offsets[0] = 0;
  for (int e = 0; e < E; ++e) offsets[e + 1] += offsets[e];
}
// One block per expert, over the rows in passes of threads × kPlaceItems: each thread takes kPlaceItems consecutive
// rows, so a block scan of the threads' hit counts gives each hit its place in row order (a stable permutation)
// with a sixteenth of the passes (and barriers) of a row a thread.
constexpr int kPlaceItems = 16;
__global__ void place_kernel(int32_t* source, int32_t* row_of, const int32_t* offsets, const int32_t* idx,
                             int64_t rows) {
  const int e = static_cast<int>(blockIdx.x);
  using Scan = cub::BlockScan<int, threads>;
  __shared__ typename Scan::TempStorage tmp;
  int base = offsets[e];
  for (int64_t r0 = 0; r0 < rows; r0 += int64_t{threads} * kPlaceItems) {
    const int64_t first = r0 + static_cast<int64_t>(threadIdx.x) * kPlaceItems;
    unsigned hits = 0;
    for (int i = 0; i < kPlaceItems; ++i)
      if (first + i < rows && idx[first + i] == e) hits |= 1u << i;
    int before = 0, total = 0;
    Scan(tmp).ExclusiveSum(__popc(hits), before, total);
    for (int at = base + before; hits != 0; hits &= hits - 1, ++at) {
      const int64_t r = first + __ffs(hits) - 1;
      source[at] = static_cast<int32_t>(r);
      row_of[r] = at;
    }
    base += total;
    __syncthreads();  // tmp is reused by the next pass's scan
  }
}

// One block per row (gathered, or token for the backward and the combine), N columns a thread at a time (16-byte
// accesses where H and the pointers allow); each column's sum over the token's k rows runs in slot order.
template <typename T, int N>
__global__ void gather_kernel(T* xs, const T* x, const int32_t* source, int k, int64_t H) {
  const int64_t r = blockIdx.x;
  const T* src = x + static_cast<int64_t>(source[r] / k) * H;
  for (int64_t h = static_cast<int64_t>(threadIdx.x) * N; h < H; h += static_cast<int64_t>(blockDim.x) * N)
    *reinterpret_cast<Pack<T, N>*>(xs + r * H + h) = *reinterpret_cast<const Pack<T, N>*>(src + h);
}

template <typename T, int N>
__global__ void gather_backward_kernel(T* dx, const T* dxs, const int32_t* row_of, int k, int64_t H, bool accumulate) {
  const int64_t t = blockIdx.x;
  for (int64_t h = static_cast<int64_t>(threadIdx.x) * N; h < H; h += static_cast<int64_t>(blockDim.x) * N) {
    float v[N], add[N];
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = 0.f;
    if (accumulate) load_f32<T, N>(v, dx + t * H + h);
    for (int j = 0; j < k; ++j) {
      load_f32<T, N>(add, dxs + static_cast<int64_t>(row_of[t * k + j]) * H + h);
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] += add[i];
    }
    store_f32<T, N>(dx + t * H + h, v);
  }
}

template <typename T, int N>
__global__ void combine_forward_kernel(T* y, const T* ys, const float* weights, const int32_t* row_of, int k,
                                       int64_t H) {
  const int64_t t = blockIdx.x;
  for (int64_t h = static_cast<int64_t>(threadIdx.x) * N; h < H; h += static_cast<int64_t>(blockDim.x) * N) {
    float v[N], add[N];
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = 0.f;
    for (int j = 0; j < k; ++j) {
      const float w = weights[t * k + j];
      load_f32<T, N>(add, ys + static_cast<int64_t>(row_of[t * k + j]) * H + h);
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] += w * add[i];
    }
    store_f32<T, N>(y + t * H + h, v);
  }
}

// Block r (a grouped row): d_weights of its routed row from u·act (+ dy·b_e), then u scaled in place.
template <typename T>
__global__ void combine_weights_backward_kernel(T* u, float* d_weights, const T* act, const float* weights,
                                                const int32_t* source, const int32_t* idx, const T* dy,
                                                const T* down_bias, int k, int64_t I, int64_t H) {
  const int64_t r = blockIdx.x;
  const int32_t routed = source[r];
  const float w = weights[routed];
  float dot = 0.f;
  for (int64_t i = threadIdx.x; i < I; i += blockDim.x) {
    const float g = to_f32(u[r * I + i]);
    dot += g * to_f32(act[r * I + i]);
    u[r * I + i] = from_f32<T>(g * w);
  }
  if (down_bias != nullptr) {
    const T* d = dy + static_cast<int64_t>(routed / k) * H;
    const T* b = down_bias + static_cast<int64_t>(idx[routed]) * H;
    for (int64_t h = threadIdx.x; h < H; h += blockDim.x) dot += to_f32(d[h]) * to_f32(b[h]);
  }
  using Reduce = cub::BlockReduce<float, threads>;
  __shared__ typename Reduce::TempStorage tmp;
  const float total = Reduce(tmp).Sum(dot);
  if (threadIdx.x == 0) d_weights[routed] = total;
}

template <typename T>
__global__ void row_sigmoid_gate_forward_kernel(T* y, const T* x, const T* g, int64_t H) {
  const int64_t t = blockIdx.x;
  const float s = 1.f / (1.f + expf(-to_f32(g[t])));
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x)
    y[t * H + h] = from_f32<T>(to_f32(y[t * H + h]) + s * to_f32(x[t * H + h]));
}

template <typename T>
__global__ void row_sigmoid_gate_backward_kernel(T* dx, T* dg, const T* dy, const T* x, const T* g, int64_t H) {
  const int64_t t = blockIdx.x;
  const float s = 1.f / (1.f + expf(-to_f32(g[t])));
  float dot = 0.f;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
    const float d = to_f32(dy[t * H + h]);
    dot += to_f32(x[t * H + h]) * d;
    dx[t * H + h] = from_f32<T>(s * d);
  }
  using Reduce = cub::BlockReduce<float, threads>;
  __shared__ typename Reduce::TempStorage tmp;
  const float total = Reduce(tmp).Sum(dot);
  if (threadIdx.x == 0) dg[t] = from_f32<T>(s * (1.f - s) * total);
}

}  // namespace

template <typename T>
void moe_route_forward(float* probs, int32_t* idx, float* weights, const T* logits, int64_t tokens,
                       const MoeRouting& r, cudaStream_t s) {
  MT_ASSERT(r.top_k > 0 && r.top_k <= r.experts && r.groups > 0 && r.experts % r.groups == 0 &&
                r.topk_groups <= r.groups && r.groups <= max_groups,
            "moe_route_forward: top {} of {} experts in {} groups", r.top_k, r.experts, r.groups);
  if (tokens == 0) return;
  const unsigned blocks = grid_for(tokens * 32, threads, 1 << 20);  // a warp per token
  const Routing routing = routing_of(r);
  if (!r.sigmoid && r.groups == 1 && r.experts <= 32 * 8 && r.top_k <= max_top_k) {
    // V, the experts per lane, rounded up to 1, 2, 4 or 8.
    if (r.experts <= 32)
      route_softmax_kernel<T, 1><<<blocks, threads, 0, s>>>(probs, idx, weights, logits, tokens, routing);
    else if (r.experts <= 64)
      route_softmax_kernel<T, 2><<<blocks, threads, 0, s>>>(probs, idx, weights, logits, tokens, routing);
    else if (r.experts <= 128)
      route_softmax_kernel<T, 4><<<blocks, threads, 0, s>>>(probs, idx, weights, logits, tokens, routing);
    else
      route_softmax_kernel<T, 8><<<blocks, threads, 0, s>>>(probs, idx, weights, logits, tokens, routing);
  } else {
    route_forward_kernel<T><<<grid_for(tokens, threads, 1 << 20), threads, 0, s>>>(
        probs, idx, weights, logits, static_cast<const T*>(r.score_bias), tokens, routing);
  }
  MT_CHECK_LAUNCH("moe_route_forward", "tokens={} E={} k={}", tokens, r.experts, r.top_k);
}

template <typename T>
void moe_route_backward(T* d_logits, const float* d_weights, const float* probs, const int32_t* idx,
                        const float* weights, const float* aux_grad, const int32_t* seq_lens, int64_t seq,
                        int64_t tokens, const MoeRouting& r, cudaStream_t s) {
  if (tokens == 0) return;
  route_backward_kernel<T><<<grid_for(tokens, threads, 1 << 20), threads, 0, s>>>(
      d_logits, d_weights, probs, idx, weights, aux_grad, seq_lens, seq, tokens, routing_of(r));
  MT_CHECK_LAUNCH("moe_route_backward", "tokens={} E={} k={}", tokens, r.experts, r.top_k);
}

void moe_router_stats(int32_t* counts, float* prob_sums, const float* probs, const int32_t* idx,
                      const int32_t* seq_lens, int64_t seq, int64_t tokens, int64_t E, int64_t k, cudaStream_t s) {
  router_stats_kernel<<<static_cast<unsigned>(E), threads, 0, s>>>(counts, prob_sums, probs, idx, seq_lens, seq,
                                                                    tokens, static_cast<int>(E), static_cast<int>(k));
  MT_CHECK_LAUNCH("moe_router_stats", "tokens={} E={} k={}", tokens, E, k);
}

void moe_permute(int32_t* offsets, int32_t* source, int32_t* row_of, const int32_t* idx, int64_t tokens, int64_t E,
                 int64_t k, cudaStream_t s) {
  const int64_t rows = tokens * k;
  count_kernel<<<static_cast<unsigned>(E), threads, 0, s>>>(offsets, idx, rows);
  offsets_kernel<<<1, 1, 0, s>>>(offsets, static_cast<int>(E));
  place_kernel<<<static_cast<unsigned>(E), threads, 0, s>>>(source, row_of, offsets, idx, rows);
  MT_CHECK_LAUNCH("moe_permute", "rows={} E={}", rows, E);
}

template <typename T>
void moe_gather(T* xs, const T* x, const int32_t* source, int64_t rows, int64_t k, int64_t H, cudaStream_t s) {
  if (rows == 0) return;
  constexpr int N = vec16<T>;
  if (vec_ok(N, {H}, {xs, x}))
    gather_kernel<T, N><<<static_cast<unsigned>(rows), threads, 0, s>>>(xs, x, source, static_cast<int>(k), H);
  else
    gather_kernel<T, 1><<<static_cast<unsigned>(rows), threads, 0, s>>>(xs, x, source, static_cast<int>(k), H);
  MT_CHECK_LAUNCH("moe_gather", "rows={} H={}", rows, H);
}

template <typename T>
void moe_gather_backward(T* dx, const T* dxs, const int32_t* row_of, int64_t tokens, int64_t k, int64_t H,
                         bool accumulate, cudaStream_t s) {
  if (tokens == 0) return;
  constexpr int N = vec16<T>;
  if (vec_ok(N, {H}, {dx, dxs}))
    gather_backward_kernel<T, N><<<static_cast<unsigned>(tokens), threads, 0, s>>>(dx, dxs, row_of,
                                                                                   static_cast<int>(k), H, accumulate);
  else
    gather_backward_kernel<T, 1><<<static_cast<unsigned>(tokens), threads, 0, s>>>(dx, dxs, row_of,
                                                                                   static_cast<int>(k), H, accumulate);
  MT_CHECK_LAUNCH("moe_gather_backward", "tokens={} H={}", tokens, H);
}

template <typename T>
void moe_combine_forward(T* y, const T* ys, const float* weights, const int32_t* row_of, int64_t tokens, int64_t k,
                         int64_t H, cudaStream_t s) {
  if (tokens == 0) return;
  constexpr int N = vec16<T>;
  if (vec_ok(N, {H}, {y, ys}))
    combine_forward_kernel<T, N><<<static_cast<unsigned>(tokens), threads, 0, s>>>(y, ys, weights, row_of,
                                                                                   static_cast<int>(k), H);
  else
    combine_forward_kernel<T, 1><<<static_cast<unsigned>(tokens), threads, 0, s>>>(y, ys, weights, row_of,
                                                                                   static_cast<int>(k), H);
  MT_CHECK_LAUNCH("moe_combine_forward", "tokens={} H={}", tokens, H);
}

template <typename T>
void moe_combine_weights_backward(T* u, float* d_weights, const T* act, const float* weights, const int32_t* source,
                                  const int32_t* idx, const T* dy, const T* down_bias, int64_t rows, int64_t k,
                                  int64_t I, int64_t H, cudaStream_t s) {
  MT_ASSERT(rows >= 0 && rows <= 0x7fffffff && k > 0 && I > 0 && H > 0,
            "moe_combine_weights_backward: rows {} k {} I {} H {}", rows, k, I, H);
  if (rows == 0) return;
  combine_weights_backward_kernel<T><<<static_cast<unsigned>(rows), threads, 0, s>>>(
      u, d_weights, act, weights, source, idx, dy, down_bias, static_cast<int>(k), I, H);
  MT_CHECK_LAUNCH("moe_combine_weights_backward", "rows={} k={} I={} H={}", rows, k, I, H);
}

template <typename T>
void row_sigmoid_gate_forward(T* y, const T* x, const T* g, int64_t tokens, int64_t H, cudaStream_t s) {
  if (tokens == 0) return;
  row_sigmoid_gate_forward_kernel<T><<<static_cast<unsigned>(tokens), threads, 0, s>>>(y, x, g, H);
  MT_CHECK_LAUNCH("row_sigmoid_gate_forward", "tokens={} H={}", tokens, H);
}

template <typename T>
void row_sigmoid_gate_backward(T* dx, T* dg, const T* dy, const T* x, const T* g, int64_t tokens, int64_t H,
                           cudaStream_t s) {
  if (tokens == 0) return;
  row_sigmoid_gate_backward_kernel<T><<<static_cast<unsigned>(tokens), threads, 0, s>>>(dx, dg, dy, x, g, H);
  MT_CHECK_LAUNCH("row_sigmoid_gate_backward", "tokens={} H={}", tokens, H);
}

#define MT_MOE_INSTANTIATE(T)                                                                                         \
  template void moe_route_forward<T>(float*, int32_t*, float*, const T*, int64_t, const MoeRouting&, cudaStream_t); \
  template void moe_route_backward<T>(T*, const float*, const float*, const int32_t*, const float*, const float*,  \
                                      const int32_t*, int64_t, int64_t, const MoeRouting&, cudaStream_t);           \
  template void moe_gather<T>(T*, const T*, const int32_t*, int64_t, int64_t, int64_t, cudaStream_t);               \
  template void moe_gather_backward<T>(T*, const T*, const int32_t*, int64_t, int64_t, int64_t, bool, cudaStream_t); \
  template void moe_combine_forward<T>(T*, const T*, const float*, const int32_t*, int64_t, int64_t, int64_t,        \
                                       cudaStream_t);                                                               \
  template void moe_combine_weights_backward<T>(T*, float*, const T*, const float*, const int32_t*, const int32_t*, \
                                                const T*, const T*, int64_t, int64_t, int64_t, int64_t, cudaStream_t); \
  template void row_sigmoid_gate_forward<T>(T*, const T*, const T*, int64_t, int64_t, cudaStream_t);                    \
  template void row_sigmoid_gate_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t, cudaStream_t);
MT_MOE_INSTANTIATE(float)
MT_MOE_INSTANTIATE(__nv_bfloat16)
#undef MT_MOE_INSTANTIATE

}  // namespace mt::cuda
