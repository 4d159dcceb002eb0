// JSONL metrics writer (see metrics_log.h).
#include "cli/train/metrics_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/train/evaluation.h"
#include "core/error.h"
#include "core/os_error.h"

namespace mt {
namespace {

// Writes all of `text` to fd; returns the bytes written before a failure (errno set) or text.size().
size_t write_fully(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = ENOSPC;
      return done;
    }
    done += static_cast<size_t>(w);
  }
  return done;
}

}  // namespace

MetricsLog::MetricsLog(std::filesystem::path file, int64_t resumed_at) : file_(std::move(file)) {
  if (resumed_at <= 0 || !std::filesystem::exists(file_)) return;
  std::string kept;
  std::ifstream in(file_);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && nlohmann::json::parse(line).at("step").get<int64_t>() <= resumed_at) kept += line + "\n";
  in.close();
  const std::filesystem::path tmp = file_.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  MT_REQUIRE(fd >= 0, "{}: cannot create: {}", tmp.string(), std::strerror(errno));
  const size_t done = write_fully(fd, kept);
  const int saved = errno;
  const bool ok = done == kept.size() && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    MT_REQUIRE(false, "{}: rewriting {} for the resumed run failed after {} of {} bytes; {} is unchanged",
               os_error_first(saved), tmp.string(), done, kept.size(), file_.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file_, ec);
  MT_REQUIRE(!ec, "{}: cannot rename {} into place: {}", file_.string(), tmp.string(), ec.message());
  fd_ = ::open(file_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  MT_REQUIRE(fd_ >= 0, "{}: cannot open for appending: {}", file_.string(), std::strerror(errno));
  size_ = static_cast<int64_t>(kept.size());
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::write_line(const std::string& line, int64_t step) {
  if (fd_ < 0) {
    fd_ = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
    MT_REQUIRE(fd_ >= 0, "{}: cannot open for writing: {}", file_.string(), std::strerror(errno));
  }
  const size_t done = write_fully(fd_, line);
  if (done == line.size()) {
    size_ += static_cast<int64_t>(done);
    return;
  }
  const int saved = errno;
  const int cut = ::ftruncate(fd_, size_);  // back to the last complete line
  MT_REQUIRE(false, "{}: writing the line of step {} to {} failed after {} of {} bytes{}", os_error_first(saved), step,
             file_.string(), done, line.size(), cut == 0 ? "; the partial line is removed" : "");
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
  write_line(j.dump() + "\n", r.step);
}

void MetricsLog::append_eval(const EvalResult& r, double elapsed_s) {
  nlohmann::json j = {{"step", r.step},
                            {"eval_loss", r.loss},
                            {"eval_target_tokens", r.target_tokens},
                            {"eval_examples", r.examples},
                            {"eval_time_s", r.seconds},
                            {"elapsed_s", elapsed_s}};
  for (const auto& [name, value] : r.extra) j[name] = value;
  write_line(j.dump() + "\n", r.step);
}

}  // namespace mt
