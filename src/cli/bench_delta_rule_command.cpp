// `megatrain bench-delta-rule --model SHAPE [--batch B] [--seq S] [--steps N] [--warmup W] [--dtype D] [--json]`
// (see cli/bench/bench_delta_rule.h).
#include <memory>

#include "cli/bench/bench_delta_rule.h"
#include "cli/command.h"
#include "cli/numeric_flag.h"

namespace mt {

void add_bench_delta_rule_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<BenchDeltaRuleOptions>();
  CLI::App* app = root.add_subcommand("bench-delta-rule",
                                      "time the gated delta rule's forward and backward alone at a model's "
                                      "linear-attention heads");
  app->add_option("--model", o->model, "shape file (configs/models/*.json) or model directory")->required();
  app->add_option("--dtype", o->dtype, "bfloat16 or float32")->capture_default_str();
  app->add_option("--batch", o->batch, "sequences per call")->capture_default_str()->check(integer_in(1));
  app->add_option("--seq", o->seq, "tokens per sequence")->capture_default_str()->check(integer_in(1));
  app->add_option("--steps", o->steps, "timed calls (median reported)")->capture_default_str()->check(integer_in(1));
  app->add_option("--warmup", o->warmup, "untimed calls first")->capture_default_str()->check(integer_in(0));
  app->add_flag("--json", o->json, "print one JSON object on stdout");
  commands.push_back({app, [o] { run_bench_delta_rule(*o); }});
}

}  // namespace mt
