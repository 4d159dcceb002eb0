// CUDA pipeline (see pipeline.h). Slot assignment for a pass is decided up front from the planned order
// (a region already resident is reused; otherwise the slot whose next use is farthest away is refilled),
// so copies can run as far ahead as free slots allow.
#include "kernels/runtime/pipeline.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/runtime/cuda_backend.h"
#include "kernels/ops/cuda_check.h"
#include "kernels/runtime/host_registration.h"
#include "kernels/runtime/resident_regions.h"
#include "core/error.h"
#include "kernels/ops/kernels.h"

namespace mt {
namespace {

// Event-timed intervals on a stream, summed when the stream is idle.
class IntervalTimer {
 public:
  ~IntervalTimer() {
    for (auto& [a, b] : pool_) {
      cudaEventDestroy(a);
      cudaEventDestroy(b);
    }
  }
  std::pair<cudaEvent_t, cudaEvent_t> next() {
    if (used_ == pool_.size()) {
      cudaEvent_t a, b;
      MT_CHECK_CUDA(cudaEventCreate(&a));
      MT_CHECK_CUDA(cudaEventCreate(&b));
      pool_.emplace_back(a, b);
    }
    return pool_[used_++];
  }
  double take_seconds() {
    double total = 0;
    for (size_t i = 0; i < used_; ++i) {
      float ms = 0;
      MT_CHECK_CUDA(cudaEventElapsedTime(&ms, pool_[i].first, pool_[i].second));
      total += std::max(0.0f, ms) / 1e3;
    }
    used_ = 0;
    return total;
  }

 private:
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> pool_;
  size_t used_ = 0;
};

struct Counters final : PipelineCounters {
  IntervalTimer h2d, d2h, wait;
  int64_t h2d_bytes = 0, d2h_bytes = 0;
  PipelineStats take() override {
    PipelineStats s;
    s.h2d_seconds = h2d.take_seconds();
    s.d2h_seconds = d2h.take_seconds();
    s.compute_wait_seconds = wait.take_seconds();
    s.h2d_bytes = std::exchange(h2d_bytes, 0);
    s.d2h_bytes = std::exchange(d2h_bytes, 0);
    return s;
  }
};

// Makes `stream` wait, in stream order, until the optimizer has published region r's parameters (moments: its Adam
// moments) at `version`: nothing where they already are, else a host function that blocks the stream (not the
// engine's thread, which goes on queueing compute) until they are.
void wait_published(cudaStream_t stream, const HostStore& store, int64_t r, int64_t version, bool moments) {
  if (moments ? store.moments_ready(r, version) : store.region_ready(r, version)) return;
  struct Wait {
    const HostStore* store;
    int64_t region, version;
    bool moments;
  };
  auto* w = new Wait{&store, r, version, moments};
  MT_CHECK_CUDA(cudaLaunchHostFunc(
      stream,
      [](void* p) {
        const std::unique_ptr<Wait> w(static_cast<Wait*>(p));
        if (w->moments)
          w->store->wait_moments(w->region, w->version);
        else
          w->store->wait_region(w->region, w->version);
      },
      w));
}

struct Shared {
  Backend& backend;
  HostStore& store;
  cudaStream_t compute;
  std::shared_ptr<Counters> counters = std::make_shared<Counters>();
  HostRegistration registration;
  std::unique_ptr<CudaResidentRegions> resident;  // the leading regions' state in GPU memory (may be null)
  bool is_resident(int64_t region) const { return resident && region < resident->count(); }
  // Elements of the largest region that streams (0 where every region is resident): the slots' and staging's size.
  int64_t largest_streamed_numel() const {
    int64_t n = 0;
    for (int64_t r = resident ? resident->count() : 0; r < store.num_regions(); ++r)
      n = std::max(n, store.layout().regions[static_cast<size_t>(r)].numel);
    return n;
  }
};

class CudaWeightStream final : public WeightStream {
 public:
  CudaWeightStream(std::shared_ptr<Shared> shared, int64_t slots) : sh_(std::move(shared)) {
    MT_REQUIRE(slots >= 2, "the pipeline needs at least 2 weight slots (got {})", slots);
    MT_CHECK_CUDA(cudaStreamCreateWithFlags(&h2d_, cudaStreamNonBlocking));
    const int64_t bytes = sh_->largest_streamed_numel() * static_cast<int64_t>(dtype_size(sh_->backend.dtype()));
    for (int64_t s = 0; s < slots; ++s) slots_.push_back(bytes > 0 ? sh_->backend.alloc_bytes(bytes) : nullptr);
  }
  ~CudaWeightStream() override {
    cudaStreamSynchronize(h2d_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    for (void* p : slots_)
      if (p) sh_->backend.free_bytes(p);
    if (staging_) sh_->backend.free_bytes(staging_);
    cudaStreamDestroy(h2d_);
  }

  void plan(const std::vector<int64_t>& order) override {
    // Every slot may be refilled now, but only after compute has finished the previous pass with it.
    if (!events_.empty()) {
      MT_CHECK_CUDA(cudaEventRecord(events_[1], sh_->compute));
      MT_CHECK_CUDA(cudaStreamWaitEvent(h2d_, events_[1], 0));
    }
    order_ = order;
    const size_t n = order.size(), k = slots_.size();
    slot_of_.assign(n, 0);
    loader_.assign(n, -1);
    prev_user_.assign(n, -1);
    std::vector<int64_t> resident(k, -1), last_entry(k, -1);
    size_t in_use = k;  // the slot of the latest entry that has one
    for (size_t i = 0; i < n; ++i) {
      if (sh_->is_resident(order[i])) {  // read where it lives: no slot, no copy
        slot_of_[i] = k;
        loader_[i] = kResident;
        continue;
      }
      size_t s = k;
      for (size_t j = 0; j < k; ++j)
        if (resident[j] == order[i]) s = j;
      if (s == k) {  // not resident: refill the slot used farthest in the future (never the one in use)
        int64_t best = -1;
        for (size_t j = 0; j < k; ++j) {
          if (j == in_use) continue;
          int64_t next = std::numeric_limits<int64_t>::max();
          for (size_t t = i + 1; t < n; ++t)
            if (order[t] == resident[j]) {
              next = static_cast<int64_t>(t);
              break;
            }
          if (resident[j] < 0) next = std::numeric_limits<int64_t>::max();
          if (next > best) {
            best = next;
            s = j;
          }
        }
        prev_user_[i] = last_entry[s];
        loader_[i] = static_cast<int64_t>(i);
        resident[s] = order[i];
      } else {
        loader_[i] = loader_[static_cast<size_t>(last_entry[s])];
      }
      slot_of_[i] = s;
      last_entry[s] = static_cast<int64_t>(i);
      in_use = s;
    }
    while (events_.size() < 2 * n) {
      cudaEvent_t e;
      MT_CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      events_.push_back(e);
    }
    released_.assign(n, false);
    next_ = 0;
    issued_ = 0;
  }

  const void* acquire(int64_t region) override {
    MT_ASSERT(next_ < order_.size() && order_[next_] == region, "acquire({}) out of the planned order", region);
    const size_t i = next_++;
    issue_ready_copies();
    if (loader_[i] == kResident) return sh_->resident->weights(region, sh_->compute);
    const auto loader = static_cast<size_t>(loader_[i]);
    // Waiting on a copy never issued would not wait at all: the slot plan must have let it start by now.
    MT_ASSERT(issued_ > loader, "weight copy for entry {} (region {}) not issued when compute needs it", loader,
              region);
    auto [w0, w1] = sh_->counters->wait.next();
    MT_CHECK_CUDA(cudaEventRecord(w0, sh_->compute));
    MT_CHECK_CUDA(cudaStreamWaitEvent(sh_->compute, loaded(loader), 0));
    MT_CHECK_CUDA(cudaEventRecord(w1, sh_->compute));
    return slots_[slot_of_[i]];
  }

  // The latest acquired, unreleased entry of `region` is done once the compute stream passes this point.
  void release(int64_t region) override {
    for (size_t i = next_; i-- > 0;) {
      if (order_[i] != region || released_[i]) continue;
      MT_CHECK_CUDA(cudaEventRecord(done(i), sh_->compute));
      released_[i] = true;
      break;
    }
    issue_ready_copies();
  }

  int64_t bytes_moved() const override { return bytes_moved_; }

 private:
  static constexpr int64_t kResident = -2;  // loader_ of an entry read from GPU-resident state
  cudaEvent_t loaded(size_t i) { return events_[2 * i]; }
  cudaEvent_t done(size_t i) { return events_[2 * i + 1]; }

  // Issues, in order, every copy whose slot's previous reader has been released (its done event recorded). A
  // region still being updated by the optimizer ranks is waited for in the H2D stream before its copy, so that the
  // engine queues the layers before it meanwhile.
  void issue_ready_copies() {
    for (; issued_ < order_.size(); ++issued_) {
      if (loader_[issued_] != static_cast<int64_t>(issued_)) continue;  // reuses a resident copy
      const int64_t prev = prev_user_[issued_];
      if (prev >= 0 && !released_[static_cast<size_t>(prev)]) break;  // its slot is still needed
      if (prev >= 0) MT_CHECK_CUDA(cudaStreamWaitEvent(h2d_, done(static_cast<size_t>(prev)), 0));
      wait_published(h2d_, sh_->store, order_[issued_], sh_->store.required_version(), false);
      copy(issued_);
    }
  }

  void copy(size_t i) {
    const int64_t r = order_[i];
    const int64_t n = sh_->store.layout().regions[static_cast<size_t>(r)].numel;
    const DType dt = sh_->backend.dtype(), st = sh_->store.stream_dtype();
    MT_ASSERT(dt == st || (dt == DType::bf16 && st == DType::f32), "the pipeline streams {} weights to a {} backend",
              dtype_name(st), dtype_name(dt));
    const void* src = st == DType::f32 ? static_cast<const void*>(sh_->store.master(r))
                                       : static_cast<const void*>(sh_->store.stream_bf16(r));
    const int64_t bytes = n * static_cast<int64_t>(dtype_size(st));
    // fp32 master for bf16 compute: into the staging buffer, then cast into the slot (both on the H2D stream, so
    // the next copy into staging follows the cast).
    void* dst = dt == st ? slots_[slot_of_[i]] : staging();
    auto [t0, t1] = sh_->counters->h2d.next();
    MT_CHECK_CUDA(cudaEventRecord(t0, h2d_));
    MT_CHECK_CUDA(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, h2d_));
    MT_CHECK_CUDA(cudaEventRecord(t1, h2d_));
    if (dt != st)
      cuda::cast(static_cast<__nv_bfloat16*>(slots_[slot_of_[i]]), static_cast<const float*>(dst), n, h2d_);
    MT_CHECK_CUDA(cudaEventRecord(loaded(i), h2d_));
    bytes_moved_ += bytes;
    sh_->counters->h2d_bytes += bytes;
  }

  void* staging() {
    if (!staging_)
      staging_ = sh_->backend.alloc_bytes(sh_->largest_streamed_numel() * static_cast<int64_t>(sizeof(float)));
    return staging_;
  }

  std::shared_ptr<Shared> sh_;
  cudaStream_t h2d_ = nullptr;
  std::vector<void*> slots_;
  void* staging_ = nullptr;   // fp32 landing buffer when fp32 master streams to bf16 compute
  std::vector<cudaEvent_t> events_;
  std::vector<int64_t> order_, loader_, prev_user_;
  std::vector<size_t> slot_of_;
  std::vector<bool> released_;
  size_t next_ = 0, issued_ = 0;
  int64_t bytes_moved_ = 0;
};

class CudaGradientSink final : public GradientSink {
 public:
  explicit CudaGradientSink(std::shared_ptr<Shared> shared)
      : sh_(std::move(shared)), finished_(static_cast<size_t>(sh_->store.num_regions()), false),
        begun_(finished_), direct_(finished_) {
    MT_CHECK_CUDA(cudaStreamCreateWithFlags(&d2h_, cudaStreamNonBlocking));
  }
  ~CudaGradientSink() override {
    cudaStreamSynchronize(d2h_);
    for (auto& b : buffers_) {
      if (b.data) sh_->backend.free_bytes(b.data);
      if (b.returned) cudaEventDestroy(b.returned);
    }
    if (sums_) sh_->backend.free_bytes(sums_);
    if (direct_done_) cudaEventDestroy(direct_done_);
    if (chunk_) sh_->backend.free_bytes(chunk_);
    cudaStreamDestroy(d2h_);
  }

  float* begin(int64_t region) override {
    const auto i = static_cast<size_t>(region);
    // A GPU-resident region's first pass of the step accumulates in place (its gradient is that pass's sum, as in a
    // zeroed accumulator); later passes go through an accumulator added to it in finish().
    direct_[i] = sh_->is_resident(region) && !begun_[i];
    begun_[i] = true;
    if (direct_[i]) {
      float* grad = sh_->resident->gradient(region, sh_->compute);
      sh_->backend.zero_bytes(grad, numel(region) * 4);
      return grad;
    }
    Buffer& b = buffer_for(region);
    if (b.pending) MT_CHECK_CUDA(cudaStreamWaitEvent(sh_->compute, b.returned, 0));
    b.pending = false;
    sh_->backend.zero_bytes(b.data, numel(region) * 4);
    b.region = region;
    return b.data;
  }

  // On the D2H stream, after the compute stream's last write: passes after the first add the host's sum so far
  // (acc += host, chunk by chunk through a device buffer: the same fp32 sums as adding on the host), then Σ g²
  // of the accumulator and its copy into the store. The compute stream never waits for any of it.
  void finish(int64_t region, bool first_pass) override {
    const int64_t n = numel(region), bytes = n * 4;
    if (!sums_) sums_ = static_cast<double*>(sh_->backend.alloc_bytes(sh_->store.num_regions() * 8));
    finished_[static_cast<size_t>(region)] = true;
    if (direct_[static_cast<size_t>(region)]) {  // accumulated in place: its Σ g² after the compute stream's writes
      MT_ASSERT(first_pass, "a GPU-resident gradient accumulated in place after the first pass");
      if (!direct_done_) MT_CHECK_CUDA(cudaEventCreateWithFlags(&direct_done_, cudaEventDisableTiming));
      MT_CHECK_CUDA(cudaEventRecord(direct_done_, sh_->compute));
      MT_CHECK_CUDA(cudaStreamWaitEvent(d2h_, direct_done_, 0));
      cuda::sum_squares(sums_ + region, sh_->resident->gradient(region), n, d2h_);
      return;
    }
    Buffer& b = buffer_of(region);
    MT_CHECK_CUDA(cudaEventRecord(b.returned, sh_->compute));
    MT_CHECK_CUDA(cudaStreamWaitEvent(d2h_, b.returned, 0));
    if (sh_->is_resident(region)) {  // a later pass: added to the GPU-resident gradient, the host path's fp32 sums
      MT_ASSERT(!first_pass, "the first pass of a GPU-resident region accumulates in place");
      float* grad = sh_->resident->gradient(region);
      cuda::accumulate(grad, b.data, n, d2h_);
      cuda::sum_squares(sums_ + region, grad, n, d2h_);
      MT_CHECK_CUDA(cudaEventRecord(b.returned, d2h_));
      b.pending = true;
      return;
    }
    // The optimizer's moments pass has read the previous gradient (waited for in the D2H stream).
    wait_published(d2h_, sh_->store, region, sh_->store.required_version(), true);
    float* host = sh_->store.grad(region);
    if (!first_pass) add_host_sum(b.data, host, n);
    cuda::sum_squares(sums_ + region, b.data, n, d2h_);
    auto [t0, t1] = sh_->counters->d2h.next();
    MT_CHECK_CUDA(cudaEventRecord(t0, d2h_));
    MT_CHECK_CUDA(cudaMemcpyAsync(host, b.data, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, d2h_));
    MT_CHECK_CUDA(cudaEventRecord(t1, d2h_));
    MT_CHECK_CUDA(cudaEventRecord(b.returned, d2h_));
    b.pending = true;
    bytes_moved_ += bytes;
    sh_->counters->d2h_bytes += bytes;
  }

  void wait() override { MT_CHECK_CUDA(cudaStreamSynchronize(d2h_)); }
  std::optional<double> sum_of_squares() override {
    const bool every_region = std::all_of(finished_.begin(), finished_.end(), [](bool f) { return f; });
    std::fill(finished_.begin(), finished_.end(), false);
    std::fill(begun_.begin(), begun_.end(), false);  // the engine's step is over
    if (!every_region) return std::nullopt;  // no gradient of this step on this rank (it does not deliver)
    const int64_t regions = sh_->store.num_regions();
    std::vector<double> per_region(static_cast<size_t>(regions));
    sh_->backend.download(per_region.data(), sums_, regions * 8);
    double total = 0;
    for (double s : per_region) total += s;
    return total;
  }
  int64_t bytes_moved() const override { return bytes_moved_; }

 private:
  struct Buffer {
    float* data = nullptr;
    cudaEvent_t returned = nullptr;
    bool pending = false;
    int64_t region = -1;
  };
  int64_t numel(int64_t region) const { return sh_->store.layout().regions[static_cast<size_t>(region)].numel; }

  // acc += host on the D2H stream, through one device chunk (the stream orders each copy after the previous add).
  void add_host_sum(float* acc, const float* host, int64_t n) {
    if (!chunk_) chunk_ = static_cast<float*>(sh_->backend.alloc_bytes(kAddChunk * 4));
    for (int64_t o = 0; o < n; o += kAddChunk) {
      const int64_t c = std::min(kAddChunk, n - o);
      MT_CHECK_CUDA(cudaMemcpyAsync(chunk_, host + o, static_cast<size_t>(c * 4), cudaMemcpyHostToDevice, d2h_));
      cuda::accumulate(acc + o, chunk_, c, d2h_);
    }
  }

  // Embedding and head own a buffer each; decoder layers alternate between two (of the largest layer's size) so a
  // layer's D2H overlaps the next layer's backward.
  Buffer& buffer_for(int64_t region) {
    const int64_t last = static_cast<int64_t>(sh_->store.layout().regions.size()) - 1;
    size_t idx = region == 0 ? 0 : region == last ? 1 : 2 + static_cast<size_t>(next_layer_buffer_++ % 2);
    if (buffers_.size() < 4) buffers_.resize(4);
    Buffer& b = buffers_[idx];
    if (!b.data) {
      const int64_t n = idx >= 2 ? sh_->store.layout().largest_layer_numel : numel(region);
      b.data = static_cast<float*>(sh_->backend.alloc_bytes(n * 4));
      MT_CHECK_CUDA(cudaEventCreateWithFlags(&b.returned, cudaEventDisableTiming));
    }
    return b;
  }
  Buffer& buffer_of(int64_t region) {
    for (auto& b : buffers_)
      if (b.region == region && b.data && !b.pending) return b;
    MT_ASSERT(false, "finish({}) without begin", region);
    return buffers_.front();
  }

  std::shared_ptr<Shared> sh_;
  cudaStream_t d2h_ = nullptr;
  std::vector<Buffer> buffers_;
  static constexpr int64_t kAddChunk = int64_t{1} << 24;  // floats (64 MiB; plan/memory_plan.cpp counts it)
  float* chunk_ = nullptr;   // device landing buffer of the host sum, for passes after the first
  double* sums_ = nullptr;   // [regions] Σ g² of each region's last finished accumulator (after any host sum)
  std::vector<bool> finished_;  // regions finished since the last sum_of_squares()
  std::vector<bool> begun_, direct_;  // since then: begun; accumulating in place (GPU-resident, first pass)
  cudaEvent_t direct_done_ = nullptr;
  int64_t next_layer_buffer_ = 0, bytes_moved_ = 0;
};

}  // namespace

EngineTransfers make_cuda_pipeline(Backend& backend, HostStore& store, int64_t slots, int64_t resident_regions) {
  auto shared = std::shared_ptr<Shared>(new Shared{backend, store, cuda_compute_stream(backend)});
  if (resident_regions > 0) shared->resident = std::make_unique<CudaResidentRegions>(backend, store, resident_regions);
  for (int64_t r = resident_regions; r < store.num_regions(); ++r) {
    const int64_t n = store.layout().regions[static_cast<size_t>(r)].numel;
    if (store.stream_dtype() == DType::bf16) {
      shared->registration.add(store.stream_bf16(r), n * 2);
    } else {
      shared->registration.add(store.master(r), n * 4);
    }
    shared->registration.add(store.grad(r), n * 4);
  }
  EngineTransfers t;
  t.counters = shared->counters;
  t.weights = std::make_unique<CudaWeightStream>(shared, slots);
  t.grads = std::make_unique<CudaGradientSink>(shared);
  return t;
}

}  // namespace mt
