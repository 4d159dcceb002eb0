// Data parallelism in the engine: ReducingGradientSink puts a GradientReducer (transfer/gradient_reducer.h: NCCL on
// the GPU, or MPI through host memory) between the engine and the real sink, summing each finished accumulator
// over the compute ranks. Invariants: every compute rank reduces the same regions in the same order (the engine's
// schedule is the same on every rank); only the rank that delivers for its node hands the summed gradient to the
// store.
#pragma once
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "store/host_store.h"
#include "transfer/gradient_reducer.h"
#include "transfer/weight_stream.h"

namespace mt {

class ReducingGradientSink final : public GradientSink {
 public:
  // delivers: this rank writes the node's store (node rank 0); the others only take part in the sums.
  ReducingGradientSink(std::unique_ptr<GradientSink> inner, std::unique_ptr<GradientReducer> reducer,
                       const HostStore& store, bool delivers);

  float* begin(int64_t region) override;
  void finish(int64_t region, bool first_pass) override;
  void wait() override { inner_->wait(); }
  int64_t bytes_moved() const override { return inner_->bytes_moved(); }
  std::optional<double> sum_of_squares() override { return inner_->sum_of_squares(); }  // of the sums

 private:
  std::unique_ptr<GradientSink> inner_;
  std::unique_ptr<GradientReducer> reducer_;
  const HostStore& store_;
  bool delivers_;
  std::unordered_map<int64_t, float*> open_;  // region → its accumulator, between begin and finish
};

}  // namespace mt
