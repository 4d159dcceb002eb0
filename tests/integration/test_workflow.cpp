// The fine-tuning workflow around the step: evaluation through the forward-only engine pass, epochs and warmup
// ratio resolved to steps, metrics.jsonl's epoch / elapsed_s / eval lines, and bad evaluation input refused before
// anything is written.
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "catch.h"
#include "cli/train/tensorboard_writer.h"
#include "config/config.h"
#include "core/error.h"
#include "integration/fixture_run.h"

using namespace mt::testing;
namespace fs = std::filesystem;

namespace {

std::vector<nlohmann::json> metrics_lines(const fs::path& output_dir) {
  std::ifstream in(output_dir / "metrics.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

std::string train_error(const std::string& run, std::vector<std::string> overrides) {
  std::string message;
  try {
    run_fixture("llama", run, std::move(overrides));
  } catch (const mt::Error& e) {
    message = e.what();
  }
  CHECK(!fs::exists(scratch_dir(run)));
  CHECK(message.find('\n') == std::string::npos);
  return message;
}

}  // namespace

TEST_CASE("eval loss equals the training loss on the same examples without an update", "[workflow][eval]") {
  // The whole 16-example dataset is one batch; lr 0 leaves the weights as they were, so the evaluation after step 1
  // sees the weights step 1 trained with.
  const mt::TrainSummary run = run_fixture("llama", "eval-equals-train",
                                           {"dataset.eval_dataset=fixture", "training.batch_size=16",
                                            "training.learning_rate=0", "training.num_steps=2",
                                            "training.eval_steps=1"});
  const auto lines = metrics_lines(scratch_dir("eval-equals-train"));
  std::vector<double> train, eval;
  for (const auto& j : lines) {
    if (j.contains("eval_loss")) eval.push_back(j.at("eval_loss").get<double>());
    else train.push_back(j.at("loss").get<double>());
  }
  REQUIRE(train.size() == 2);
  REQUIRE(eval.size() == 2);  // after step 1 and after the last
  CHECK(std::abs(eval[0] - train[0]) <= 1e-12 * train[0]);
  CHECK(std::abs(eval[1] - train[1]) <= 1e-12 * train[1]);
  CHECK(lines.back().at("eval_examples") == 16);
}

TEST_CASE("val_size holds examples out of training and evaluates them", "[workflow][eval]") {
  run_fixture("llama", "val-size", {"dataset.val_size=4", "training.batch_size=4", "training.num_train_epochs=2",
                                    "training.warmup_steps=0", "training.warmup_ratio=0.5", "training.eval_steps=2"});
  const auto lines = metrics_lines(scratch_dir("val-size"));
  int64_t steps = 0, evals = 0;
  for (const auto& j : lines) {
    if (j.contains("eval_loss")) {
      ++evals;
      CHECK(j.at("eval_examples") == 4);
      CHECK(std::isfinite(j.at("eval_loss").get<double>()));
    } else {
      ++steps;
      CHECK(j.at("epoch").get<double>() == Approx(static_cast<double>(j.at("step").get<int64_t>()) / 3.0));
      CHECK(j.at("elapsed_s").get<double>() > 0.0);
    }
  }
  CHECK(steps == 6);  // 2 epochs of 12 training examples in batches of 4
  CHECK(evals == 3);  // after steps 2, 4 and 6
  CHECK(lines.front().at("lr").get<double>() == 0.0);  // 3 warmup steps (ceil 0.5 × 6): the first at lr 0
}

TEST_CASE("bad evaluation input is named before anything is written", "[workflow][bad-input]") {
  const std::string file = (fixture_dir("llama") / "train.yaml").string();
  CHECK(train_error("bad-val-size", {"dataset.val_size=16"}) ==
        file + ": dataset.val_size: 16.0 holds out 16 of the 16 examples of dataset.name, leaving none to train on");
  const std::string missing = train_error("bad-eval-dataset", {"dataset.eval_dataset=held_out"});
  CHECK(missing.rfind(file + ": dataset.eval_dataset 'held_out': ", 0) == 0);
  CHECK(missing.find("no dataset named 'held_out'") != std::string::npos);
}

namespace {

uint32_t le32(const std::string& s, size_t at) {
  uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}

uint64_t read_varint(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    const auto b = static_cast<unsigned char>(s.at(at++));
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
}

// The (step, tag, value) scalars of a TensorBoard event file, every TFRecord frame's two CRCs checked.
std::vector<std::tuple<int64_t, std::string, float>> read_event_scalars(const fs::path& file, std::string* version) {
  std::ifstream in(file, std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::tuple<int64_t, std::string, float>> scalars;
  for (size_t at = 0; at < data.size();) {
    uint64_t length;
    std::memcpy(&length, data.data() + at, 8);
    REQUIRE(le32(data, at + 8) == mt::masked_crc32c(data.data() + at, 8));
    const std::string event = data.substr(at + 12, length);
    REQUIRE(le32(data, at + 12 + length) == mt::masked_crc32c(event.data(), event.size()));
    at += 16 + length;
    int64_t step = 0;
    for (size_t p = 0; p < event.size();) {
      const uint64_t key = read_varint(event, p);
      if (key == (1 << 3 | 1)) p += 8;                                            // wall_time
      else if (key == (2 << 3 | 0)) step = static_cast<int64_t>(read_varint(event, p));
      else if (key == (3 << 3 | 2)) {                                             // file_version
        const uint64_t n = read_varint(event, p);
        *version = event.substr(p, n);
        p += n;
      } else {
        REQUIRE(key == (5 << 3 | 2));                                              // summary
        const size_t end = p + read_varint(event, p);
        while (p < end) {
          REQUIRE(read_varint(event, p) == (1 << 3 | 2));                          // value
          const size_t value_end = p + read_varint(event, p);
          std::string tag;
          float simple = 0;
          while (p < value_end) {
            const uint64_t k = read_varint(event, p);
            if (k == (1 << 3 | 2)) {
              const uint64_t n = read_varint(event, p);
              tag = event.substr(p, n);
              p += n;
            } else {
              REQUIRE(k == (2 << 3 | 5));
              std::memcpy(&simple, event.data() + p, 4);
              p += 4;
            }
          }
          scalars.emplace_back(step, tag, simple);
        }
      }
    }
  }
  return scalars;
}

uint32_t be32(const std::string& s, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(s[at])) << 24 |
         static_cast<uint32_t>(static_cast<unsigned char>(s[at + 1])) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(s[at + 2])) << 8 | static_cast<unsigned char>(s[at + 3]);
}

}  // namespace

TEST_CASE("TensorBoard files hold the logged values, and the plots and all_results.json are written", "[workflow][trackers]") {
  run_fixture("llama", "trackers", {"dataset.val_size=4", "training.batch_size=4", "training.num_steps=4",
                                    "training.logging_steps=2", "training.eval_steps=2",
                                    "training.report_to=[tensorboard]", "training.plot_loss=true"});
  const fs::path out = scratch_dir("trackers");
  std::vector<fs::path> events;
  for (const auto& e : fs::directory_iterator(out / "runs")) events.push_back(e.path());
  REQUIRE(events.size() == 1);
  CHECK(events[0].filename().string().rfind("events.out.tfevents.", 0) == 0);
  std::string version;
  const auto scalars = read_event_scalars(events[0], &version);
  CHECK(version == "brain.Event:2");
  std::map<std::pair<int64_t, std::string>, float> by_step_tag;
  for (const auto& [step, tag, value] : scalars) by_step_tag[{step, tag}] = value;
  int64_t checked = 0;
  for (const auto& j : metrics_lines(out)) {
    const int64_t step = j.at("step").get<int64_t>();
    if (j.contains("eval_loss")) {
      CHECK(by_step_tag.at({step, "eval/loss"}) == static_cast<float>(j.at("eval_loss").get<double>()));
    } else {
      CHECK(by_step_tag.at({step, "train/loss"}) == static_cast<float>(j.at("loss").get<double>()));
      CHECK(by_step_tag.at({step, "train/learning_rate"}) == static_cast<float>(j.at("lr").get<double>()));
      CHECK(by_step_tag.at({step, "train/grad_norm"}) == static_cast<float>(j.at("grad_norm").get<double>()));
      CHECK(by_step_tag.count({step, "train/tokens_per_s"}) == 1);
      CHECK(by_step_tag.count({step, "train/tflops"}) == 1);
    }
    ++checked;
  }
  CHECK(checked == 4);  // steps 2 and 4, evaluations after 2 and 4
  for (const char* name : {"training_loss.png", "training_eval_loss.png"}) {
    INFO(name);
    std::ifstream in(out / name, std::ios::binary);
    const std::string png((std::istreambuf_iterator<char>(in)), {});
    REQUIRE(png.size() > 33);
    CHECK(png.substr(0, 8) == "\x89PNG\r\n\x1a\n");
    CHECK(png.substr(12, 4) == "IHDR");
    CHECK(be32(png, 16) == 640);
    CHECK(be32(png, 20) == 480);
  }
  std::ifstream results_in(out / "all_results.json");
  const auto results = nlohmann::json::parse(results_in);
  CHECK(results.at("train_steps") == 4);
  CHECK(results.contains("eval_loss"));
  CHECK(results.at("epoch").get<double>() == Approx(4.0 * 4 / 12));
}

TEST_CASE("the logged loss is the mean over the logging window", "[workflow][trackers]") {
  run_fixture("llama", "window-each", {"training.logging_steps=1"});
  run_fixture("llama", "window-pairs", {"training.logging_steps=2"});
  const auto each = read_metrics(scratch_dir("window-each"));
  const auto pairs = read_metrics(scratch_dir("window-pairs"));
  REQUIRE(each.size() == 4);
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[0].loss == Approx((each[0].loss + each[1].loss) / 2).epsilon(1e-12));
  CHECK(pairs[1].loss == Approx((each[2].loss + each[3].loss) / 2).epsilon(1e-12));
}
