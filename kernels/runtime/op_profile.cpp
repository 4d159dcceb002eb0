// Per-op GPU time (see op_profile.h).
#include "kernels/runtime/op_profile.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/ops/cuda_check.h"

namespace mt::cuda {

OpProfile::OpProfile(bool enabled) : enabled_(enabled) {}

OpProfile::~OpProfile() {
  for (auto& [a, b] : events_) {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
}

OpProfile::Span::Span(OpProfile& p, const char* name, cudaStream_t stream) : p_(p), name_(name), stream_(stream) {
  if (!p_.enabled_) return;
  slot_ = p_.names_.size();
  if (slot_ == p_.events_.size()) {
    cudaEvent_t a, b;
    MT_CHECK_CUDA(cudaEventCreate(&a));
    MT_CHECK_CUDA(cudaEventCreate(&b));
    p_.events_.emplace_back(a, b);
  }
  p_.names_.push_back(name_);
  MT_CHECK_CUDA(cudaEventRecord(p_.events_[slot_].first, stream_));
}

OpProfile::Span::~Span() {
  if (p_.enabled_) cudaEventRecord(p_.events_[slot_].second, stream_);
}

void OpProfile::fold() {
  for (size_t i = 0; i < names_.size(); ++i) {
    float ms = 0;
    MT_CHECK_CUDA(cudaEventElapsedTime(&ms, events_[i].first, events_[i].second));
    auto& [seconds, calls] = totals_[names_[i]];
    seconds += ms / 1e3;
    ++calls;
    if (i == 0) continue;
    MT_CHECK_CUDA(cudaEventElapsedTime(&ms, events_[i - 1].second, events_[i].first));
    before_[names_[i]] += ms / 1e3;
  }
  names_.clear();
}

std::string OpProfile::report() const {
  if (!enabled_) return {};
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  double total = 0;
  for (const auto& r : rows) total += r.second.first;
  std::string out = fmt::format("GPU time by op (MEGATRAIN_PROFILE_OPS), {:.3f} s in all:", total);
  for (const auto& [name, t] : rows)
    out += fmt::format("\n  {:<22} {:9.3f} s {:5.1f} % {:8} calls", name, t.first, 100 * t.first / total, t.second);
  std::vector<std::pair<std::string, double>> before(before_.begin(), before_.end());
  std::sort(before.begin(), before.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  double between = 0;
  for (const auto& b : before) between += b.second;
  out += fmt::format("\nGPU time between the timed ops (stream idle or untimed copies), {:.3f} s in all, before:",
                     between);
  for (size_t i = 0; i < before.size() && i < 12; ++i)
    out += fmt::format("\n  {:<22} {:9.3f} s", before[i].first, before[i].second);
  return out;
}

}  // namespace mt::cuda
