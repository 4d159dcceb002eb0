// Deterministic column sums out[d] += Σ_n f(n, d) over a [N, D] grid of summands (db of bias, dw of rmsnorm).
// Invariant: fp64 accumulation in a fixed order that depends only on N and D: rows split into chunks, each chunk's
// partial per column in scratch [chunks, D], then the chunks added in chunk order; no atomics.
#pragma once
#include <algorithm>

#include "kernels/ops/device_util.cuh"
#include "kernels/ops/launch_check.h"

namespace mt::cuda {
// Internal linkage: every kernel file that includes this gets its own copy of these kernels.
namespace {

inline constexpr int column_tile = 32;  // columns per block (threadIdx.x)
inline constexpr int row_lanes = 8;     // row-parallel threads per column (threadIdx.y)

// Block (column tile, chunk): partial[chunk, d] = Σ f(n, d) over the chunk's rows, lane y taking rows y, y+8, ...
template <typename F>
__global__ void column_partials_kernel(double* partial, int64_t N, int64_t D, int64_t rows_per_chunk, F f) {
  __shared__ double part[row_lanes][column_tile];
  const int64_t d = static_cast<int64_t>(blockIdx.x) * column_tile + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  const int64_t r1 = min(N, (chunk + 1) * rows_per_chunk);
  double acc = 0.0;
  if (d < D) {
    for (int64_t n = chunk * rows_per_chunk + threadIdx.y; n < r1; n += row_lanes) acc += f(n, d);
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && d < D) {
    double sum = 0.0;
#pragma unroll
    for (int y = 0; y < row_lanes; ++y) sum += part[y][threadIdx.x];
    partial[chunk * D + d] = sum;
  }
}

// out[d] += Σ_chunk partial[chunk, d], chunks in order.
__global__ void column_finish_kernel(float* out, const double* partial, int64_t chunks, int64_t D) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t d = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; d < D; d += stride) {
    double sum = 0.0;
    for (int64_t c = 0; c < chunks; ++c) sum += partial[c * D + d];
    out[d] += static_cast<float>(sum);
  }
}

// Enqueues out[d] += Σ_n f(n, d) on stream s; f is a device functor (int64_t n, int64_t d) -> double.
template <typename F>
void column_sum_accumulate(const char* op, float* out, int64_t N, int64_t D, F f, cudaStream_t s) {
  if (N == 0 || D == 0) return;
  const int64_t chunks = std::min<int64_t>((N + 63) / 64, 128);
  const int64_t rows_per_chunk = (N + chunks - 1) / chunks;
  Scratch<double> partial(op, chunks * D, s);
  const dim3 grid(static_cast<unsigned>((D + column_tile - 1) / column_tile), static_cast<unsigned>(chunks));
  column_partials_kernel<<<grid, dim3(column_tile, row_lanes), 0, s>>>(partial.get(), N, D, rows_per_chunk, f);
  MT_CHECK_LAUNCH(op, "column partials N={} D={}", N, D);
  column_finish_kernel<<<grid_for(D, 256), 256, 0, s>>>(out, partial.get(), chunks, D);
  MT_CHECK_LAUNCH(op, "column finish N={} D={}", N, D);
}

}  // namespace
}  // namespace mt::cuda
