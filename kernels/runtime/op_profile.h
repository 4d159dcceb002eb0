// Per-op GPU time of the CUDA backend, for finding where a step goes (MEGATRAIN_PROFILE_OPS=1; off otherwise and
// then free). Each op records an event pair on the compute stream; fold() (after the stream is idle) adds the
// elapsed times per op name, and the time between consecutive ops to the later op's name, and recycles the events.
// Invariant: enabled or not, it never synchronises by itself.
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mt::cuda {

class OpProfile {
 public:
  explicit OpProfile(bool enabled);
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  bool enabled() const { return enabled_; }
  // Times the ops issued on `stream` between construction and destruction (when enabled).
  class Span {
   public:
    Span(OpProfile& p, const char* name, cudaStream_t stream);
    ~Span();
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    OpProfile& p_;
    const char* name_;
    cudaStream_t stream_;
    size_t slot_ = 0;
  };
  void fold();               // the stream must be idle
  std::string report() const;  // one line per op, most time first; empty when disabled

 private:
  bool enabled_ = false;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> events_;
  std::vector<const char*> names_;       // per used slot
  std::map<std::string, std::pair<double, int64_t>> totals_;  // name → seconds, calls
  // name → seconds between the previous timed op's end and this op's start on the stream (within one fold): the
  // stream idle (the host had not issued the op yet, or it waited for another stream) or running untimed work
  // (copies, memsets).
  std::map<std::string, double> before_;
};

}  // namespace mt::cuda
