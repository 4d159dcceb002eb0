// What a run reports besides the console: metrics.jsonl (every logged step and evaluation), TensorBoard event files
// under output_dir/runs (training.report_to: [tensorboard]), and at the end training_loss.png /
// training_eval_loss.png (training.plot_loss) and all_results.json, as transformers' Trainer and LLaMA-Factory
// leave them.
// Invariant: a StepRecord's optional scalars (`extra`, e.g. aux_loss) reach every sink under their own name; the
// world rank 0 alone owns a RunReport.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/train/evaluation.h"
#include "cli/train/metrics_log.h"
#include "cli/train/tensorboard_writer.h"
#include "config/config.h"

namespace mt {

struct RunTotals {
  int64_t steps = 0;             // steps this run took
  int64_t sequences = 0;         // sequences those steps trained on
  int64_t tokens = 0;
  double seconds = 0.0;          // wall time of those steps
  double epoch = 0.0;            // after the last step
};

class RunReport {
 public:
  RunReport(const TrainingConfig& training, const std::filesystem::path& output_dir, int64_t resumed_at);
  // tflops: the step's 6N TFLOP/s (TensorBoard only; metrics.jsonl has step_time_s and tokens to recompute it).
  void step(const StepRecord& record, double tflops);
  void eval(const EvalResult& result, double elapsed_s);
  // The plots and all_results.json; returns the files written.
  std::vector<std::filesystem::path> finish(const RunTotals& totals);

 private:
  std::filesystem::path out_;
  bool plot_ = false;
  MetricsLog metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::vector<std::pair<int64_t, double>> losses_, eval_losses_;
  double loss_sum_ = 0.0;
  int64_t loss_count_ = 0;
};

}  // namespace mt
