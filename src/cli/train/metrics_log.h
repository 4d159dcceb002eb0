// MetricsLog: <output_dir>/metrics.jsonl, one JSON object per logged step, flushed per line.
// Invariant: each line is a complete JSON object; the file is created at the first record, never before. A resumed
// run keeps the lines of the steps up to its checkpoint and appends after them.
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>

namespace mt {

struct StepRecord {
  int64_t step = 0;             // 1-based
  double loss = 0.0;
  double grad_norm = 0.0;       // before clipping
  double lr = 0.0;
  int64_t tokens = 0;           // non-padding tokens in this step
  int64_t target_tokens = 0;
  int64_t tokens_seen = 0;      // cumulative
  double step_time_s = 0.0;
  double tokens_per_s = 0.0;
  bool skipped = false;         // non-finite gradient norm: no update applied
  std::optional<double> aux_loss;  // MoE router load-balancing loss (loss includes coef × it), where computed
};

class MetricsLog {
 public:
  // resumed_at > 0: a run resumed from the checkpoint of that step; earlier lines of later steps are dropped.
  explicit MetricsLog(std::filesystem::path file, int64_t resumed_at = 0);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void append(const StepRecord& record);

 private:
  std::filesystem::path file_;
  std::FILE* out_ = nullptr;
};

}  // namespace mt
