// training.plot_loss: <output_dir>/training_loss.png (and training_eval_loss.png when there were evaluations) at the
// end of a run, as LLaMA-Factory's plot_loss draws them: the logged values, pale, and their exponential moving average
// (its smoothing weight 1.8 · (sigmoid(0.05 · n) − 0.5)) over steps, 640 × 480 RGB, axes with tick marks (no text:
// the values are in metrics.jsonl).
// Invariant: a plot is written whole (a temporary file renamed) or not at all; fewer than two points write none.
#pragma once
#include <cstdint>
#include <filesystem>
#include <utility>
#include <vector>

namespace mt {

constexpr int kPlotWidth = 640, kPlotHeight = 480;

// LLaMA-Factory's smoothing of a curve.
std::vector<double> smooth_curve(const std::vector<double>& values);

// (step, value) points; returns false (nothing written) for fewer than two.
bool write_loss_plot(const std::filesystem::path& file, const std::vector<std::pair<int64_t, double>>& points);

}  // namespace mt
