// Helpers for the CUDA op tests: GPU detection (skip without one), device buffers round-tripping fp32 host data as fp32
// or bf16 (on the tests' stream, or in a Backend's memory), int32 arrays in a Backend's memory, the CPU reference
// backend, the dtype loop, tolerances, event timing. Invariant: fresh buffers hold
// NaN bytes, so unwritten outputs show; every copy, fill and launch of the kernel tests goes through one stream
// (test_stream), so they run in program order; a BackendBuffer's copies go through its backend (which orders them
// with the backend's ops) and return once the data has landed.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/backend.h"
#include "backend/grad_check.h"
#include "catch.h"
#include "core/dtype.h"

namespace mt::test {

inline bool gpu_available() {
  static const bool available = [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  }();
  return available;
}

// First statement of every GPU test case.
#define MT_REQUIRE_GPU()                                    \
  do {                                                      \
    if (!::mt::test::gpu_available()) {                     \
      WARN("no CUDA device: GPU test case skipped");        \
      return;                                               \
    }                                                       \
  } while (0)

#define MT_CUDA_OK(call)                                                  \
  do {                                                                    \
    const cudaError_t mt_err_ = (call);                                   \
    INFO(#call << ": " << cudaGetErrorString(mt_err_));                  \
    REQUIRE(mt_err_ == cudaSuccess);                                      \
  } while (0)

// The stream every test launches on (a created one, so nothing relies on the legacy default stream).
inline cudaStream_t test_stream() {
  static cudaStream_t s = [] {
    cudaStream_t created = nullptr;
    cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking);
    return created;
  }();
  return s;
}

inline void sync() { MT_CUDA_OK(cudaStreamSynchronize(test_stream())); }

// n elements of E in device memory, NaN-filled (0xff bytes) at birth.
template <typename E>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    MT_CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n, 1) * sizeof(E)));
    MT_CUDA_OK(cudaMemsetAsync(p_, 0xff, std::max<size_t>(n, 1) * sizeof(E), test_stream()));
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  E* get() const { return p_; }
  size_t size() const { return n_; }

  template <typename H>
  void write(const std::vector<H>& host) {
    static_assert(sizeof(H) == sizeof(E));
    REQUIRE(host.size() == n_);
    if (n_ > 0) MT_CUDA_OK(cudaMemcpyAsync(p_, host.data(), n_ * sizeof(E), cudaMemcpyHostToDevice, test_stream()));
    sync();  // the host vector may go away
  }
  template <typename H>
  std::vector<H> read() const {
    static_assert(sizeof(H) == sizeof(E));
    std::vector<H> host(n_);
    if (n_ > 0) MT_CUDA_OK(cudaMemcpyAsync(host.data(), p_, n_ * sizeof(E), cudaMemcpyDeviceToHost, test_stream()));
    sync();
    return host;
  }

 private:
  E* p_ = nullptr;
  size_t n_;
};

template <typename T> inline constexpr bool is_f32 = std::is_same_v<T, float>;
template <typename T> inline constexpr const char* dtype_label = is_f32<T> ? "float32" : "bfloat16";

// The values a T tensor can hold: bf16 rounds to nearest even (as the kernels and torch do).
template <typename T>
std::vector<float> rounded(std::vector<float> v) {
  if constexpr (!is_f32<T>) {
    for (float& x : v) x = mt::round_to_bf16(x);
  }
  return v;
}

template <typename T>
std::unique_ptr<DeviceBuffer<T>> upload(const std::vector<float>& host) {
  auto buf = std::make_unique<DeviceBuffer<T>>(host.size());
  if constexpr (is_f32<T>) {
    buf->write(host);
  } else {
    std::vector<uint16_t> bits(host.size());
    for (size_t i = 0; i < host.size(); ++i) bits[i] = mt::f32_to_bf16(host[i]);
    buf->write(bits);
  }
  return buf;
}

inline std::unique_ptr<DeviceBuffer<int32_t>> upload_ints(const std::vector<int32_t>& host) {
  auto buf = std::make_unique<DeviceBuffer<int32_t>>(host.size());
  buf->write(host);
  return buf;
}

template <typename T>
std::vector<float> download(const DeviceBuffer<T>& buf) {
  if constexpr (is_f32<T>) {
    return buf.template read<float>();
  } else {
    const auto bits = buf.template read<uint16_t>();
    std::vector<float> v(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) v[i] = mt::bf16_to_f32(bits[i]);
    return v;
  }
}

// fp32 values as a tensor of dtype dt holds them (bf16 rounds to nearest even).
inline std::vector<float> rounded_to(mt::DType dt, std::vector<float> v) {
  if (dt == mt::DType::bf16) {
    for (float& x : v) x = mt::round_to_bf16(x);
  }
  return v;
}

// The CPU reference the CUDA ops are compared with: fp32 ops on host memory (its "backend memory" is host memory).
inline mt::Backend& cpu() {
  static const std::unique_ptr<mt::Backend> be = mt::make_cpu_backend();
  return *be;
}

// n int32 values in a backend's memory (alloc_bytes / free_bytes), uploaded from host values when given; the upload
// has landed when the constructor returns.
struct Ints {
  mt::Backend& be;
  int64_t n;
  int32_t* p;
  Ints(mt::Backend& b, int64_t count)
      : be(b), n(count), p(static_cast<int32_t*>(b.alloc_bytes(std::max<int64_t>(count, 1) * 4))) {}
  Ints(mt::Backend& b, const std::vector<int32_t>& v) : Ints(b, static_cast<int64_t>(v.size())) {
    be.upload(p, v.data(), n * 4);
    be.synchronize();
  }
  ~Ints() { be.free_bytes(p); }
  Ints(const Ints&) = delete;
  Ints& operator=(const Ints&) = delete;
  std::vector<int32_t> read() const {
    std::vector<int32_t> v(static_cast<size_t>(n));
    be.download(v.data(), p, n * 4);
    return v;
  }
};

// n elements of dt in a backend's memory (alloc_bytes / free_bytes), NaN-filled at birth, holding fp32 host data as dt.
class BackendBuffer {
 public:
  BackendBuffer(mt::Backend& be, int64_t n, mt::DType dt) : be_(be), n_(n), dt_(dt) {
    p_ = be_.alloc_bytes(bytes());
    const std::vector<unsigned char> nan(static_cast<size_t>(bytes()), 0xff);
    be_.upload(p_, nan.data(), bytes());
    be_.synchronize();
  }
  BackendBuffer(mt::Backend& be, const std::vector<float>& host, mt::DType dt)
      : BackendBuffer(be, static_cast<int64_t>(host.size()), dt) {
    write(host);
  }
  ~BackendBuffer() { be_.free_bytes(p_); }
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;

  void* get() const { return p_; }
  float* floats() const {
    REQUIRE(dt_ == mt::DType::f32);
    return static_cast<float*>(p_);
  }
  void write(const std::vector<float>& host) {
    REQUIRE(static_cast<int64_t>(host.size()) == n_);
    if (dt_ == mt::DType::f32) {
      be_.upload(p_, host.data(), bytes());
    } else {
      std::vector<uint16_t> bits(host.size());
      for (size_t i = 0; i < host.size(); ++i) bits[i] = mt::f32_to_bf16(host[i]);
      be_.upload(p_, bits.data(), bytes());
    }
    be_.synchronize();  // the host vector may go away
  }
  std::vector<float> read() const {
    std::vector<float> host(static_cast<size_t>(n_));
    if (n_ == 0) return host;
    if (dt_ == mt::DType::f32) {
      be_.download(host.data(), p_, bytes());
    } else {
      std::vector<uint16_t> bits(host.size());
      be_.download(bits.data(), p_, bytes());
      for (size_t i = 0; i < host.size(); ++i) host[i] = mt::bf16_to_f32(bits[i]);
    }
    return host;
  }

 private:
  int64_t bytes() const { return std::max<int64_t>(n_, 1) * static_cast<int64_t>(mt::dtype_size(dt_)); }
  mt::Backend& be_;
  int64_t n_;
  mt::DType dt_;
  void* p_ = nullptr;
};

// ‖got − want‖/‖want‖ bound for a backend of dtype dt (as tolerance<T>).
inline double tolerance_of(mt::DType dt) { return dt == mt::DType::f32 ? 1e-5 : 2e-2; }

// Runs f.template operator()<T>() for T = float, then __nv_bfloat16.
template <typename F>
void for_each_dtype(F&& f) {
  f.template operator()<float>();
  f.template operator()<__nv_bfloat16>();
}

// ‖got − want‖/‖want‖ bound per dtype: fp32 math against the fp32 reference, or bf16 storage of the outputs.
template <typename T> inline constexpr double tolerance = is_f32<T> ? 1e-5 : 2e-2;

// Whether two vectors hold the same bits (a bool, so that a failing CHECK does not print millions of elements).
template <typename E>
bool same_bits(const std::vector<E>& a, const std::vector<E>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(E)) == 0);
}

template <typename A, typename B>
void check_close(const std::string& what, const std::vector<A>& got, const std::vector<B>& want, double tol) {
  REQUIRE(got.size() == want.size());
  const double err = rel_err(got, want);
  INFO(what << ": relative error " << err << " (tolerance " << tol << ", " << got.size() << " elements)");
  CHECK(err <= tol);  // false for NaN: catches elements an op never wrote
}

// Milliseconds per call of f (work on test_stream) over `calls` calls after one untimed call, by events.
template <typename F>
double milliseconds_per_call(int calls, F f) {
  f();
  cudaEvent_t start, stop;
  MT_CUDA_OK(cudaEventCreate(&start));
  MT_CUDA_OK(cudaEventCreate(&stop));
  MT_CUDA_OK(cudaEventRecord(start, test_stream()));
  for (int i = 0; i < calls; ++i) f();
  MT_CUDA_OK(cudaEventRecord(stop, test_stream()));
  MT_CUDA_OK(cudaEventSynchronize(stop));
  float ms = 0.f;
  MT_CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return static_cast<double>(ms) / calls;
}

}  // namespace mt::test
