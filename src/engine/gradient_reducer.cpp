// The reducing decorator of a gradient sink (see gradient_reducer.h).
#include "engine/gradient_reducer.h"

#include "core/error.h"

namespace mt {

ReducingGradientSink::ReducingGradientSink(std::unique_ptr<GradientSink> inner, std::unique_ptr<GradientReducer> reducer,
                                           const HostStore& store, bool delivers)
    : inner_(std::move(inner)), reducer_(std::move(reducer)), store_(store), delivers_(delivers) {}

float* ReducingGradientSink::begin(int64_t region) {
  float* acc = inner_->begin(region);
  open_[region] = acc;
  return acc;
}

void ReducingGradientSink::finish(int64_t region, bool first_pass) {
  const auto it = open_.find(region);
  MT_ASSERT(it != open_.end(), "gradient of region {} finished before it began", region);
  reducer_->all_reduce(it->second, store_.numel(region));
  open_.erase(it);
  if (delivers_) inner_->finish(region, first_pass);
}

}  // namespace mt
