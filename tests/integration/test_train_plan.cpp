// The worker ranks' TrainPlan on the wire (cli/train/train_plan.h): the plan of every family fixture's model comes
// back from its JSON equal member by member (every region offset, MoE and MLA among them, and every slot field), and
// a plan with a key missing, an unknown key or a value of the wrong kind is refused naming it.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "catch.h"
#include "cli/train/train_plan.h"
#include "core/error.h"
#include "integration/fixture_run.h"
#include "model/model_spec.h"

namespace mt {
namespace {

// A plan over `layout` with every other member away from its default, so that a member lost on the way shows.
TrainPlan plan_of(ParamLayout layout) {
  TrainPlan plan;
  plan.layout = std::move(layout);
  plan.dtype = DType::bf16;
  plan.optimizer = {0.8, 0.95, 1e-6, 0.1, 0.5, UpdatePasses::fused};
  plan.updates_applied = 17;
  plan.tier = {OffloadMode::optimizer_master, {"/nvme/a", "/nvme/b"}, "0123456789abcdef", TierIoChoice::threads};
  return plan;
}

TrainPlan fixture_plan(const std::string& name) {
  return plan_of(make_param_layout(load_model_spec(testing::fixture_dir(name) / "model" / "config.json", true)));
}

// The message of the refusal of `text`, or "" where it is accepted.
std::string refusal(const std::string& text) {
  try {
    parse_train_plan(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the train plan of every family fixture comes back from its JSON member by member", "[train_plan]") {
  int fixtures = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::fixture_dir(""))) {
    if (!std::filesystem::is_regular_file(entry.path() / "model" / "config.json")) continue;
    const std::string name = entry.path().filename().string();
    INFO(name);
    const TrainPlan plan = fixture_plan(name);
    const TrainPlan back = parse_train_plan(serialise_train_plan(plan));
    REQUIRE(back.layout.regions.size() == plan.layout.regions.size());
    for (size_t r = 0; r < plan.layout.regions.size(); ++r) {
      INFO("region " << r);
      CHECK(back.layout.regions[r].offsets == plan.layout.regions[r].offsets);
      CHECK(back.layout.regions[r].params == plan.layout.regions[r].params);
    }
    CHECK(back == plan);
    ++fixtures;
  }
  CHECK(fixtures >= 40);  // the families of tests/fixtures/*/model
}

TEST_CASE("the train plan carries the MoE and latent-attention offsets by name", "[train_plan]") {
  const nlohmann::json moe = nlohmann::json::parse(serialise_train_plan(fixture_plan("qwen3_moe")));
  const nlohmann::json& moe_layer = moe.at("layout").at("regions").at(1).at("offsets").at("moe");
  CHECK(moe_layer.at("router").get<int64_t>() >= 0);
  CHECK(moe_layer.at("experts").get<int64_t>() >= 0);
  CHECK(moe_layer.at("expert_stride").get<int64_t>() > 0);
  const nlohmann::json mla = nlohmann::json::parse(serialise_train_plan(fixture_plan("deepseek_v3")));
  const nlohmann::json& mla_layer = mla.at("layout").at("regions").at(1).at("offsets").at("mla");
  CHECK(mla_layer.at("kv_latent").get<int64_t>() >= 0);
  CHECK(mla_layer.at("k_nope").get<int64_t>() >= 0);
}

TEST_CASE("a train plan missing a key, with an unknown one or a wrong kind of value is refused naming it",
          "[train_plan]") {
  const nlohmann::json plan = nlohmann::json::parse(serialise_train_plan(fixture_plan("qwen3_moe")));
  REQUIRE(refusal(plan.dump()).empty());

  nlohmann::json missing = plan;
  missing["layout"]["regions"][1]["offsets"]["moe"].erase("router");
  CHECK(refusal(missing.dump()) == "train plan.layout.regions[1].offsets.moe: no key 'router'");

  missing = plan;
  missing["layout"]["regions"][2]["params"][0].erase("offset");
  CHECK(refusal(missing.dump()) == "train plan.layout.regions[2].params[0]: no key 'offset'");

  missing = plan;
  missing.erase("updates_applied");
  CHECK(refusal(missing.dump()) == "train plan: no key 'updates_applied'");

  nlohmann::json unknown = plan;
  unknown["layout"]["regions"][1]["offsets"]["attention"]["q_lora"] = 4;
  CHECK(refusal(unknown.dump()) == "train plan.layout.regions[1].offsets.attention: unknown key 'q_lora'");

  nlohmann::json wrong = plan;
  wrong["layout"]["regions"][1]["params"][0]["shape"] = "64";
  CHECK(refusal(wrong.dump()) == "train plan.layout.regions[1].params[0].shape: an array expected, not \"64\"");
  wrong = plan;
  wrong["tier"]["tag"] = 3;
  CHECK(refusal(wrong.dump()) == "train plan.tier.tag: a value of another kind expected, not 3");
}

}  // namespace mt
