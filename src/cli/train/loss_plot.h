// training.plot_loss: <output_dir>/training_loss.png (and training_eval_loss.png when there were evaluations) at the
// end of a run, as LLaMA-Factory's plot_loss draws them with matplotlib: the logged values ("original", pale) and
// their exponential moving average ("smoothed"; its weight 1.8 · (sigmoid(0.05 · n) − 0.5)) over steps, 640 × 480,
// with numbered axes, the labels "step" and the value's name, the title "<value> of <output_dir>" and a legend,
// drawn and lettered by cairo.
// Invariant: a plot is written whole (a temporary file renamed) or not at all; fewer than two points write none.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace mt {

constexpr int kPlotWidth = 640, kPlotHeight = 480;

// LLaMA-Factory's smoothing of a curve.
std::vector<double> smooth_curve(const std::vector<double>& values);

// Tick values for an axis over [low, high]: multiples of 1, 2 or 5 × 10^k, about `target` of them, within the range.
std::vector<double> axis_ticks(double low, double high, int target);

// (step, value) points; returns false (nothing written) for fewer than two. `title` heads the plot, `value_name`
// labels its y axis.
bool write_loss_plot(const std::filesystem::path& file, const std::vector<std::pair<int64_t, double>>& points,
                     const std::string& title, const std::string& value_name);

}  // namespace mt
