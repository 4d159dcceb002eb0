// JSONL metrics writer (see metrics_log.h).
#include "cli/train/metrics_log.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

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

void MetricsLog::append(const StepRecord& r) {
  if (!out_) {
    out_ = std::fopen(file_.c_str(), "w");
    MT_REQUIRE(out_ != nullptr, "{}: cannot open for writing", file_.string());
  }
  nlohmann::json j = {{"step", r.step},
                      {"loss", r.loss},
                      {"grad_norm", r.grad_norm},
                      {"lr", r.lr},
                      {"tokens", r.tokens},
                      {"target_tokens", r.target_tokens},
                      {"tokens_seen", r.tokens_seen},
                      {"step_time_s", r.step_time_s},
                      {"tokens_per_s", r.tokens_per_s}};
  if (r.skipped) j["skipped"] = true;
  if (r.aux_loss) j["aux_loss"] = *r.aux_loss;
  const std::string line = j.dump() + "\n";
  MT_REQUIRE(std::fwrite(line.data(), 1, line.size(), out_) == line.size() && std::fflush(out_) == 0,
             "{}: write failed", file_.string());
}

}  // namespace mt
