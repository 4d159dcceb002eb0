// MetricsLog: <output_dir>/metrics.jsonl, one JSON object per logged step (and one per evaluation), flushed per line.
// Invariant: each line is a complete JSON object; the file is created at the first record, never before. A resumed
// run keeps the lines of the steps up to its checkpoint (rewritten under a temporary name, then renamed) and
// appends after them. A failed write (a full disk) names the OS error and the bytes, and cuts the file back to its
// last complete line.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

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
  double epoch = 0.0;           // epochs of the training examples consumed after this step (fractional)
  double elapsed_s = 0.0;       // seconds since this run's first step began
  std::vector<std::pair<std::string, double>> extra = {};  // optional scalars (e.g. aux_loss), logged under their names
};

struct EvalResult;

class MetricsLog {
 public:
  // resumed_at > 0: a run resumed from the checkpoint of that step; earlier lines of later steps are dropped.
  explicit MetricsLog(std::filesystem::path file, int64_t resumed_at = 0);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void append(const StepRecord& record);
  // An evaluation line: {"step", "eval_loss", "eval_target_tokens", "eval_examples", "eval_time_s", "elapsed_s"} and
  // the result's extra values (preference pairs' eval_rewards/...).
  void append_eval(const EvalResult& result, double elapsed_s);

 private:
  void write_line(const std::string& line, int64_t step);

  std::filesystem::path file_;
  int fd_ = -1;
  int64_t size_ = 0;  // bytes of complete lines in the file
};

}  // namespace mt
