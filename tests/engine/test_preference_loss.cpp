// Pairwise preference losses (engine/preference_loss.h) against tools/make_preference_fixtures.py: for every loss
// type and option set, the batch loss, its gradient with respect to each summed log-probability (PyTorch autograd)
// and LLaMA-Factory's logged metrics, within 1e-10 relative (both sides fp64).
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "core/error.h"
#include "engine/preference_loss.h"

namespace {

bool close(double got, double want, double tol = 1e-10) {
  return std::abs(got - want) <= tol * std::max(1.0, std::abs(want));
}

}  // namespace

TEST_CASE("preference losses match LLaMA-Factory's, with their gradients and metrics", "[engine][preference]") {
  std::ifstream in(std::string(MEGATRAIN_SOURCE_DIR) + "/tests/fixtures/preference_loss/cases.json");
  REQUIRE(in.good());
  const nlohmann::json fixture = nlohmann::json::parse(in);
  REQUIRE(fixture["cases"].size() == 9);
  for (const nlohmann::json& c : fixture["cases"]) {
    DYNAMIC_SECTION(c["name"].get<std::string>()) {
      mt::PreferenceOptions options;
      options.type = mt::preference_loss_type(c["pref_loss"].get<std::string>());
      options.beta = c["pref_beta"];
      options.ftx = c["pref_ftx"];
      options.label_smoothing = c["dpo_label_smoothing"];
      options.simpo_gamma = c["simpo_gamma"];
      const size_t pairs = c["chosen"].size();
      mt::PreferenceMetrics metrics;
      for (size_t i = 0; i < pairs; ++i) {
        const mt::SequenceLogp chosen{c["chosen"][i], c["chosen_tokens"][i]};
        const mt::SequenceLogp rejected{c["rejected"][i], c["rejected_tokens"][i]};
        const mt::SequenceLogp ref_chosen{c["reference_chosen"][i], c["chosen_tokens"][i]};
        const mt::SequenceLogp ref_rejected{c["reference_rejected"][i], c["rejected_tokens"][i]};
        const mt::PairTerms p = mt::preference_pair_terms(options, chosen, rejected, ref_chosen, ref_rejected);
        // The batch loss is the mean over pairs: each pair's derivative over the pair count.
        CHECK(close(p.d_chosen / static_cast<double>(pairs), c["d_chosen"][i].get<double>()));
        CHECK(close(p.d_rejected / static_cast<double>(pairs), c["d_rejected"][i].get<double>()));
        metrics.add(p);
      }
      const nlohmann::json& m = c["metrics"];
      CHECK(close(metrics.loss(), c["loss"].get<double>()));
      CHECK(close(metrics.rewards_chosen(), m["rewards/chosen"].get<double>()));
      CHECK(close(metrics.rewards_rejected(), m["rewards/rejected"].get<double>()));
      CHECK(close(metrics.rewards_accuracies(), m["rewards/accuracies"].get<double>()));
      CHECK(close(metrics.rewards_margins(), m["rewards/margins"].get<double>()));
      CHECK(close(metrics.logps_chosen(), m["logps/chosen"].get<double>()));
      CHECK(close(metrics.logps_rejected(), m["logps/rejected"].get<double>()));
      CHECK(close(metrics.sft_loss(), m["sft_loss"].get<double>()));
      if (m.contains("odds_ratio_loss")) CHECK(close(metrics.odds_ratio_loss(), m["odds_ratio_loss"].get<double>()));
    }
  }
}

TEST_CASE("preference loss names are LLaMA-Factory's; an unknown one is refused by name", "[engine][preference]") {
  CHECK(mt::uses_reference(mt::preference_loss_type("sigmoid")));
  CHECK(mt::uses_reference(mt::preference_loss_type("hinge")));
  CHECK(mt::averages_logps(mt::preference_loss_type("ipo")));
  CHECK_FALSE(mt::uses_reference(mt::preference_loss_type("orpo")));
  CHECK_FALSE(mt::uses_reference(mt::preference_loss_type("simpo")));
  CHECK_THROWS_WITH(mt::preference_loss_type("dpo"), "pref_loss: 'dpo' is not one of sigmoid, hinge, ipo, orpo, simpo");
}
