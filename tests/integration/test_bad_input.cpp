// Bad input ends `train` with one clear error naming the thing and the place, before anything is
// written to output_dir.
#include <fstream>

#include "catch.h"
#include "config/config.h"
#include "core/error.h"
#include "integration/fixture_run.h"

using namespace mt::testing;
namespace fs = std::filesystem;

namespace {

// A copy of the llama fixture's model and data in a scratch dir, for editing.
fs::path copy_fixture(const std::string& run) {
  const fs::path dir = fresh_scratch_dir(run);
  fs::create_directories(dir);
  fs::copy(fixture_dir("llama"), dir, fs::copy_options::recursive);
  return dir;
}

void replace_in_file(const fs::path& file, const std::string& from, const std::string& to) {
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  std::ofstream(file) << text;
}

// Runs train on the edited copy; returns the error message and checks output_dir was not created.
std::string train_error(const fs::path& dir, std::vector<std::string> overrides = {}) {
  const fs::path out = dir / "output";
  std::vector<std::string> all = {"model.name=" + (dir / "model").string(),
                                  "dataset.dataset_dir=" + (dir / "data").string(),
                                  "training.output_dir=" + out.string()};
  all.insert(all.end(), overrides.begin(), overrides.end());
  std::string message;
  try {
    mt::run_training(mt::load_config(dir / "train.yaml", all));
  } catch (const mt::Error& e) {
    message = e.what();
  }
  CHECK(!fs::exists(out));
  CHECK(message.find('\n') == std::string::npos);
  return message;
}

}  // namespace

TEST_CASE("a missing model directory is named", "[bad-input]") {
  const auto dir = copy_fixture("bad-model-dir");
  fs::remove_all(dir / "model");
  const auto msg = train_error(dir);
  CHECK(msg.find((dir / "model").string()) != std::string::npos);
}

TEST_CASE("a missing tensor is named", "[bad-input]") {
  const auto dir = copy_fixture("bad-missing-tensor");
  replace_in_file(dir / "model" / "config.json", "\"num_hidden_layers\": 3", "\"num_hidden_layers\": 4");
  const auto msg = train_error(dir);
  CHECK(msg.find("model.layers.3.") != std::string::npos);
  CHECK(msg.find("not found") != std::string::npos);
}

TEST_CASE("a tensor of the wrong shape is named with both shapes", "[bad-input]") {
  const auto dir = copy_fixture("bad-shape");
  replace_in_file(dir / "model" / "config.json", "\"intermediate_size\": 64", "\"intermediate_size\": 48");
  const auto msg = train_error(dir);
  CHECK(msg.find("mlp.gate_proj.weight") != std::string::npos);
  CHECK(msg.find("48") != std::string::npos);
  CHECK(msg.find("64") != std::string::npos);
}

TEST_CASE("a malformed JSONL line is reported as file:line", "[bad-input]") {
  const auto dir = copy_fixture("bad-jsonl");
  std::ofstream(dir / "data" / "train.jsonl", std::ios::app) << "{\"input_ids\": [1, 2,\n";
  const auto msg = train_error(dir);
  CHECK(msg.find("train.jsonl:17") != std::string::npos);
}

TEST_CASE("a token id out of range is reported as file:line", "[bad-input]") {
  const auto dir = copy_fixture("bad-token");
  std::ofstream(dir / "data" / "train.jsonl", std::ios::app) << "{\"input_ids\": [1, 2, 128]}\n";
  const auto msg = train_error(dir);
  CHECK(msg.find("train.jsonl:17") != std::string::npos);
  CHECK(msg.find("128") != std::string::npos);
}

TEST_CASE("an unknown config key and a bad value are named", "[bad-input]") {
  const auto dir = copy_fixture("bad-config");
  CHECK_THROWS_WITH(mt::load_config(dir / "train.yaml", {"training.batch_sise=4"}),
                    mt_test::contains("training.batch_sise"));
  CHECK_THROWS_WITH(mt::load_config(dir / "train.yaml", {"training.lr_scheduler=cosin"}),
                    mt_test::contains("cosin"));
}
