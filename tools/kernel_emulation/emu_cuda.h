// Host emulation of the CUDA constructs the kernels it runs use (kernels/ops/gated_delta_rule_chunked.cu,
// lightning_attention_chunked.cu, glu.cu, clamped_swiglu.cu, cross_entropy.cu), for running them without a GPU
// (run_chunked_delta_rule.sh, run_lightning_chunked.sh, run_glu.sh, run_cross_entropy.sh): one std::thread per CUDA
// thread, std::barrier for __syncthreads and for warp shuffles (of 4- and 8-byte values), shared memory and scratch
// filled with NaN (a read before a write shows in the results, as does a read of an asynchronous copy before its
// thread waited for it), and block_mm as one fp32 sum per output element (for bf16 operands after asserting wmma's
// shape and alignment preconditions); grid_for caps grids at 8 blocks per emulated multiprocessor (emu_sm_count, 1 by
// default, so grid-stride loops go round more than once); emu_note_launch records which launch site of a launcher ran
// (emu_launched).
// Invariant: a hand-run tool, never part of the build.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include "backend/gated_delta_rule_scratch.h"
#include "core/dtype.h"
#include "core/error.h"
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
struct __nv_bfloat16 { uint16_t x; };
inline float __bfloat162float(__nv_bfloat16 x) { return mt::bf16_to_f32(x.x); }
inline __nv_bfloat16 __float2bfloat16_rn(float x) { return {mt::f32_to_bf16(x)}; }
struct Dim { unsigned x = 0, y = 0; };
inline thread_local Dim threadIdx;
inline Dim blockIdx, blockDim, gridDim;
// The kernels launched since the driver last cleared it, as their launch sites name them
// ("glu_forward_kernel<T, N, A>").
inline std::vector<std::string> emu_launched;
inline void emu_note_launch(const char* kernel) { emu_launched.emplace_back(kernel); }
inline unsigned char* emu_smem = nullptr;
inline std::barrier<>* emu_bar = nullptr;
inline std::vector<std::unique_ptr<std::barrier<>>> emu_warp_bars;
inline uint64_t emu_shfl_buf[1024];
inline void __syncthreads() { emu_bar->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp_bars[threadIdx.x / 32]->arrive_and_wait(); }
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline int __clzll(long long x) { return __builtin_clzll(static_cast<unsigned long long>(x)); }
// A warp shuffle: every lane publishes v, then reads lane source(t)'s (its own where source(t) == t).
template <typename V, typename Source>
V emu_shuffle(V v, Source source) {
  static_assert(sizeof(V) == 4 || sizeof(V) == 8);
  const unsigned t = threadIdx.x;
  auto& wb = *emu_warp_bars[t / 32];
  std::memcpy(&emu_shfl_buf[t], &v, sizeof(V));
  wb.arrive_and_wait();
  V r;
  std::memcpy(&r, &emu_shfl_buf[source(t)], sizeof(V));
  wb.arrive_and_wait();
  return r;
}
template <typename V>
V __shfl_xor_sync(unsigned, V v, int o) {
  return emu_shuffle(v, [o](unsigned t) { return t ^ static_cast<unsigned>(o); });
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
template <typename V>
V __shfl_up_sync(unsigned, V v, int o) {
  return emu_shuffle(v, [o](unsigned t) { return t % 32 >= static_cast<unsigned>(o) ? t - o : t; });
}
template <typename V>
V __shfl_down_sync(unsigned, V v, int o) {
  return emu_shuffle(v, [o](unsigned t) { return t % 32 + o < 32 ? t + o : t; });
}
// Bit l of the result: lane l's predicate.
inline unsigned __ballot_sync(unsigned, bool p) {
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l) {
    const unsigned lane = l;
    const float got = emu_shuffle(p ? 1.f : 0.f, [lane](unsigned t) { return t / 32 * 32 + lane; });
    if (got != 0.f) bits |= 1u << l;
  }
  return bits;
}
namespace mt::cuda {
// launch_check.h's grid_for with emu_sm_count multiprocessors.
inline int emu_sm_count = 1;
inline int sm_count() { return emu_sm_count; }
inline unsigned grid_for(int64_t work, int threads, int blocks_per_sm = 8) {
  const int64_t need = (work + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(sm_count()) * blocks_per_sm;
  return static_cast<unsigned>(need < 1 ? 1 : (need < cap ? need : cap));
}
// launch_check.h's is_aligned.
inline bool is_aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }
// launch_check.h's vec_ok: every pointer 16-byte aligned and each count a multiple of n.
inline bool vec_ok(int64_t n, std::initializer_list<int64_t> counts, std::initializer_list<const void*> ptrs) {
  for (int64_t c : counts)
    if (c % n != 0) return false;
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}
// kernels/ops/async_copy.cuh: a thread's copies land only when it waits for them (so a read before the wait and the
// barrier after it sees shared memory's NaN); global is anything outside the block's shared memory.
inline unsigned emu_smem_bytes = 0;
struct EmuCopy {
  void* dst;
  unsigned char bytes[16];
};
inline thread_local std::vector<EmuCopy> emu_pending_copies;
inline void copy16_async(void* dst, const void* src) {
  EmuCopy c{dst, {}};
  std::memcpy(c.bytes, src, 16);
  emu_pending_copies.push_back(c);
}
inline void wait_async_copies() {
  for (const EmuCopy& c : emu_pending_copies) std::memcpy(c.dst, c.bytes, 16);
  emu_pending_copies.clear();
}
inline bool is_global(const void* p) {
  const auto* c = static_cast<const unsigned char*>(p);
  return c < emu_smem || c >= emu_smem + emu_smem_bytes;
}
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};
template <typename T> inline constexpr int vec16 = 16 / static_cast<int>(sizeof(T));
inline float to_f32(float x) { return x; }
inline float to_f32(__nv_bfloat16 x) { return mt::bf16_to_f32(x.x); }
template <typename T> T from_f32(float x);
template <> inline float from_f32<float>(float x) { return x; }
template <> inline __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return {mt::f32_to_bf16(x)}; }
template <typename A> A warp_sum(A x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
// The tensor-core product's semantics (each output one fp32 sum of bf16 products), with wmma's preconditions.
template <bool TA, bool TB>
void block_mm(float* C, int ldc, const __nv_bfloat16* A, int lda, const __nv_bfloat16* B, int ldb, int M, int N, int K,
              bool acc) {
  MT_ASSERT(M % 16 == 0 && N % 16 == 0 && K % 16 == 0 && lda % 8 == 0 && ldb % 8 == 0 && ldc % 4 == 0, "wmma shape");
  MT_ASSERT(reinterpret_cast<uintptr_t>(A) % 32 == 0 && reinterpret_cast<uintptr_t>(B) % 32 == 0 &&
            reinterpret_cast<uintptr_t>(C) % 32 == 0, "wmma alignment");
  for (int e = threadIdx.x; e < M * N; e += blockDim.x) {
    const int m = e / N, n = e % N;
    float s = acc ? C[m * ldc + n] : 0.f;
    for (int k = 0; k < K; ++k)
      s += to_f32(TA ? A[k * lda + m] : A[m * lda + k]) * to_f32(TB ? B[n * ldb + k] : B[k * ldb + n]);
    C[m * ldc + n] = s;
  }
  __syncthreads();
}
template <bool TA, bool TB>
void block_mm(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M, int N, int K, bool acc) {
  for (int e = threadIdx.x; e < M * N; e += blockDim.x) {
    const int m = e / N, n = e % N;
    float s = acc ? C[m * ldc + n] : 0.f;
    for (int k = 0; k < K; ++k) s += (TA ? A[k * lda + m] : A[m * lda + k]) * (TB ? B[n * ldb + k] : B[k * ldb + n]);
    C[m * ldc + n] = s;
  }
  __syncthreads();
}
// block_mm2_store's semantics (kernels/ops/block_mm.cuh), with wmma's preconditions for bf16.
template <typename T>
void block_mm2_store(T* out, int64_t out_ld, int rows, int64_t cols, int rows_valid, const T* A1, int lda1,
                     const T* B1, int ldb1, int K1, const T* A2, int lda2, const T* B2, int ldb2, int K2, int M, int N,
                     float*) {
  if (sizeof(T) == 2)
    MT_ASSERT(M % 16 == 0 && N % 16 == 0 && K1 % 16 == 0 && K2 % 16 == 0 && lda1 % 8 == 0 && ldb1 % 8 == 0 &&
                  lda2 % 8 == 0 && ldb2 % 8 == 0 && rows <= M && cols <= N,
              "wmma shape");
  for (int e = threadIdx.x; e < rows * cols; e += blockDim.x) {
    const int m = static_cast<int>(e / cols), n = static_cast<int>(e % cols);
    float s = 0.f;
    for (int k = 0; k < K1; ++k) s += to_f32(A1[m * lda1 + k]) * to_f32(B1[k * ldb1 + n]);
    for (int k = 0; k < K2; ++k) s += to_f32(A2[m * lda2 + k]) * to_f32(B2[k * ldb2 + n]);
    out[m * out_ld + n] = from_f32<T>(m < rows_valid ? s : 0.f);
  }
  __syncthreads();
}
}  // namespace mt::cuda
// Runs kernel body f() for every block (blocks × blocks_y) with `threads` threads and `smem` bytes of NaN-filled
// shared memory.
inline void emu_launch(unsigned blocks, unsigned threads, int smem, const std::function<void()>& f,
                       unsigned blocks_y = 1) {
  std::vector<unsigned char> storage(static_cast<size_t>(smem) + 256);
  unsigned char* base = storage.data() + (128 - reinterpret_cast<uintptr_t>(storage.data()) % 128) % 128;
  blockDim.x = threads;
  gridDim.x = blocks;
  gridDim.y = blocks_y;
  for (unsigned b = 0; b < blocks * blocks_y; ++b) {
    const float nan = std::nanf("");
    for (size_t i = 0; i + 4 <= static_cast<size_t>(smem); i += 4) std::memcpy(&base[i], &nan, 4);
    emu_smem = base;
    mt::cuda::emu_smem_bytes = static_cast<unsigned>(smem);
    blockIdx.x = b % blocks;
    blockIdx.y = b / blocks;
    std::barrier<> bar(threads);
    emu_bar = &bar;
    emu_warp_bars.clear();
    for (unsigned w = 0; w < threads / 32; ++w) emu_warp_bars.push_back(std::make_unique<std::barrier<>>(32));
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        threadIdx.x = t;
        f();
        MT_ASSERT(mt::cuda::emu_pending_copies.empty(), "block {} thread {}: asynchronous copies never waited for",
                  b, t);
        bar.arrive_and_drop();
      });
    for (auto& t : ts) t.join();
  }
}
