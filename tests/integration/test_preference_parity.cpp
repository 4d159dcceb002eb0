// Preference training (training.stage dpo, kto) against PyTorch: `train` on tests/fixtures/preference/<case> (one
// tiny Qwen2 and 12 tokenized pairs, or 12 tokenized KTO examples, linked into every case) reproduces, for every
// pref_loss and KTO, the per-step loss, pre-clip gradient norm, learning rate, every final parameter
// (tools/make_preference_fixtures.py's fp32 and float64 runs) and LLaMA-Factory's logged metrics (rewards/chosen,
// rejected, accuracies, margins, logps/chosen, rejected, sft_loss, odds_ratio_loss; KTO's kl) within 1e-4
// (rewards, differences of log-probability sums, within 1e-6 of those sums);
// the reference pass is written to the run directory and read back, not recomputed, on resume.
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "core/error.h"
#include "integration/fixture_run.h"

using namespace mt::testing;

namespace {

std::vector<nlohmann::json> metrics_lines(const std::filesystem::path& output_dir) {
  std::ifstream in(output_dir / "metrics.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

void check_case(const std::string& name) {
  const std::string run = "preference-" + name;
  check_against_reference("preference/" + name, run);
  std::ifstream in(fixture_dir("preference/" + name) / "reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  const std::vector<nlohmann::json> lines = metrics_lines(scratch_dir(run));
  REQUIRE(lines.size() == ref["metrics"].size());
  for (size_t k = 0; k < lines.size(); ++k) {
    // Rewards are β × differences of log-probability sums of tens (fp32 on both sides): their absolute error scales
    // with those sums, not with the (small) difference.
    const double scale = std::abs(ref["metrics"][k]["logps/chosen"].get<double>()) +
                         std::abs(ref["metrics"][k]["logps/rejected"].get<double>());
    for (const auto& [key, want] : ref["metrics"][k].items()) {
      INFO(name << " step " << k + 1 << " " << key);
      const bool logged = lines[k].contains(key);
      // sft_loss is logged where LLaMA-Factory logs it (orpo) or pref_ftx adds it; the reference has it always.
      if (key == "sft_loss" && !logged) continue;
      REQUIRE(logged);
      const double got = lines[k][key].get<double>(), w = want.get<double>();
      CHECK(std::abs(got - w) <= 1e-4 * std::abs(w) + 1e-6 * scale);
    }
  }
}

}  // namespace

TEST_CASE("DPO (sigmoid) matches PyTorch and TRL's formula", "[parity][preference]") { check_case("dpo_sigmoid"); }
TEST_CASE("DPO with label smoothing and pref_ftx matches PyTorch", "[parity][preference]") {
  check_case("dpo_sigmoid_ftx");
}
TEST_CASE("hinge preference loss matches PyTorch", "[parity][preference]") { check_case("dpo_hinge"); }
TEST_CASE("IPO (per-token averaged log-probabilities) matches PyTorch", "[parity][preference]") {
  check_case("dpo_ipo");
}
TEST_CASE("ORPO (no reference) matches PyTorch", "[parity][preference]") { check_case("dpo_orpo"); }
TEST_CASE("SimPO (no reference) matches PyTorch", "[parity][preference]") { check_case("dpo_simpo"); }

TEST_CASE("KTO matches PyTorch and TRL's formula", "[parity][preference][kto]") { check_case("kto"); }
TEST_CASE("KTO with pref_ftx and both weights matches PyTorch", "[parity][preference][kto]") {
  check_case("kto_ftx");
}

TEST_CASE("KTO's reference pass covers each example's completion and KL sequence", "[parity][preference][kto]") {
  run_fixture("preference/kto", "preference-kto-reference");
  std::ifstream in(scratch_dir("preference-kto-reference") / "reference_logps.json");
  const nlohmann::json reference = nlohmann::json::parse(in);
  REQUIRE(reference["train"].size() == 24);  // 12 examples × (completion, KL sequence)
  // The first step's policy is the reference: its KL estimate is exactly 0, as PyTorch's.
  CHECK(metrics_lines(scratch_dir("preference-kto-reference"))[0]["kl"].get<double>() == 0.0);
}

TEST_CASE("the reference pass is kept in the run directory and not recomputed on resume", "[parity][preference]") {
  std::vector<std::string> inputs = {"training.save_steps=1"};
  const auto whole = run_fixture("preference/dpo_sigmoid", "preference-resume-whole", inputs);
  const auto out = scratch_dir("preference-resume-whole");
  std::ifstream in(out / "reference_logps.json");
  const nlohmann::json reference = nlohmann::json::parse(in);
  CHECK(reference["train"].size() == 24);  // 12 pairs × (chosen, rejected)
  // A run resumed at step 2 of the same directory reads the file (its weights have moved on: it could not recompute
  // them), and ends where the uninterrupted run ended.
  const auto dir = fixture_dir("preference/dpo_sigmoid");
  auto resume = inputs;
  resume.push_back("model.name=" + (dir / "model").string());
  resume.push_back("dataset.dataset_dir=" + (dir / "data").string());
  resume.push_back("training.resume_from=" + (out / "checkpoints" / "step-000002.h5").string());
  resume.push_back("training.output_dir=" + out.string());
  const auto resumed = mt::run_training(mt::load_config(fixture_dir("preference/dpo_sigmoid") / "train.yaml", resume));
  CHECK(resumed.losses.size() == 1);
  CHECK(resumed.losses.back() == whole.losses.back());
  // Without the file, a resumed run refuses to make one up.
  std::filesystem::remove(out / "reference_logps.json");
  CHECK_THROWS_WITH(mt::run_training(mt::load_config(fixture_dir("preference/dpo_sigmoid") / "train.yaml", resume)),
                    Catch::Matchers::Contains("reference_logps.json: not found; a resumed run cannot recompute"));
}
