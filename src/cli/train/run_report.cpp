// RunReport (see run_report.h).
#include "cli/train/run_report.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/train/loss_plot.h"
#include "core/error.h"

namespace mt {

RunReport::RunReport(const TrainingConfig& training, const std::filesystem::path& output_dir, int64_t resumed_at)
    : out_(output_dir), plot_(training.plot_loss), metrics_(output_dir / "metrics.jsonl", resumed_at) {
  for (const std::string& tracker : training.report_to)
    if (tracker == "tensorboard") tensorboard_ = std::make_unique<TensorBoardWriter>(output_dir / "runs");
}

void RunReport::step(const StepRecord& r, double tflops) {
  metrics_.append(r);
  losses_.emplace_back(r.step, r.loss);
  loss_sum_ += r.loss;
  ++loss_count_;
  if (!tensorboard_) return;
  std::vector<std::pair<std::string, double>> scalars = {{"train/loss", r.loss},
                                                         {"train/learning_rate", r.lr},
                                                         {"train/grad_norm", r.grad_norm},
                                                         {"train/epoch", r.epoch},
                                                         {"train/tokens_per_s", r.tokens_per_s},
                                                         {"train/tflops", tflops}};
  for (const auto& [name, value] : r.extra) scalars.emplace_back("train/" + name, value);
  tensorboard_->add_scalars(r.step, scalars);
}

void RunReport::eval(const EvalResult& result, double elapsed_s) {
  metrics_.append_eval(result, elapsed_s);
  eval_losses_.emplace_back(result.step, result.loss);
  if (!tensorboard_) return;
  std::vector<std::pair<std::string, double>> scalars = {{"eval/loss", result.loss}};
  for (const auto& [name, value] : result.extra) scalars.emplace_back("eval/" + name.substr(name.find('_') + 1), value);
  tensorboard_->add_scalars(result.step, scalars);
}

std::vector<std::filesystem::path> RunReport::finish(const RunTotals& t) {
  std::vector<std::filesystem::path> written;
  if (plot_) {
    // LLaMA-Factory's titles: "training loss of <output_dir>", "eval_loss of <output_dir>".
    if (write_loss_plot(out_ / "training_loss.png", losses_, "training loss of " + out_.string(), "loss"))
      written.push_back(out_ / "training_loss.png");
    if (write_loss_plot(out_ / "training_eval_loss.png", eval_losses_, "eval_loss of " + out_.string(), "eval_loss"))
      written.push_back(out_ / "training_eval_loss.png");
  }
  nlohmann::ordered_json j;
  j["epoch"] = t.epoch;
  if (loss_count_ > 0) j["train_loss"] = loss_sum_ / static_cast<double>(loss_count_);  // of the logged values
  j["train_runtime"] = t.seconds;
  j["train_steps"] = t.steps;
  if (t.seconds > 0) {
    j["train_samples_per_second"] = static_cast<double>(t.sequences) / t.seconds;
    j["train_steps_per_second"] = static_cast<double>(t.steps) / t.seconds;
    j["train_tokens_per_second"] = static_cast<double>(t.tokens) / t.seconds;
  }
  if (!eval_losses_.empty()) j["eval_loss"] = eval_losses_.back().second;
  const std::filesystem::path file = out_ / "all_results.json";
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream o(tmp);
    o << j.dump(2) << "\n";
    MT_REQUIRE(o.good(), "{}: cannot write", tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  MT_REQUIRE(!ec, "{}: cannot rename into place: {}", file.string(), ec.message());
  written.push_back(file);
  return written;
}

}  // namespace mt
