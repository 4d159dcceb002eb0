// JSONL metrics writer (see metrics_log.h).
#include "cli/train/metrics_log.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/train/evaluation.h"
#include "core/error.h"

namespace mt {

MetricsLog::MetricsLog(std::filesystem::path file, int64_t resumed_at) : file_(std::move(file)) {
  if (resumed_at <= 0 || !std::filesystem::exists(file_)) return;
  std::string kept;
  std::ifstream in(file_);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && nlohmann::json::parse(line).at("step").get<int64_t>() <= resumed_at) kept += line + "\n";
  in.close();
  out_ = std::fopen(file_.c_str(), "w");
  MT_REQUIRE(out_ != nullptr && std::fwrite(kept.data(), 1, kept.size(), out_) == kept.size() && std::fflush(out_) == 0,
             "{}: cannot rewrite for the resumed run", file_.string());
}

MetricsLog::~MetricsLog() {
  if (out_) std::fclose(out_);
}

void MetricsLog::write(const std::string& line) {
  if (!out_) {
    out_ = std::fopen(file_.c_str(), "w");
    MT_REQUIRE(out_ != nullptr, "{}: cannot open for writing", file_.string());
  }
  MT_REQUIRE(std::fwrite(line.data(), 1, line.size(), out_) == line.size() && std::fflush(out_) == 0,
             "{}: write failed", file_.string());
}

void MetricsLog::append(const StepRecord& r) {
  nlohmann::json j = {{"step", r.step},
                      {"loss", r.loss},
                      {"grad_norm", r.grad_norm},
                      {"lr", r.lr},
                      {"tokens", r.tokens},
                      {"target_tokens", r.target_tokens},
                      {"tokens_seen", r.tokens_seen},
                      {"step_time_s", r.step_time_s},
                      {"tokens_per_s", r.tokens_per_s},
                      {"epoch", r.epoch},
                      {"elapsed_s", r.elapsed_s}};
  if (r.skipped) j["skipped"] = true;
  for (const auto& [name, value] : r.extra) j[name] = value;
  write(j.dump() + "\n");
}

void MetricsLog::append_eval(const EvalResult& r, double elapsed_s) {
  const nlohmann::json j = {{"step", r.step},
                            {"eval_loss", r.loss},
                            {"eval_target_tokens", r.target_tokens},
                            {"eval_examples", r.examples},
                            {"eval_time_s", r.seconds},
                            {"elapsed_s", elapsed_s}};
  write(j.dump() + "\n");
}

}  // namespace mt
