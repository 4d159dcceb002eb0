// `megatrain bench-optim --params P [--steps N] [--warmup W] [--dtype D] [--json]` (see cli/bench/bench_optim.h);
// under mpirun every rank takes part, as in training.
#include <memory>

#include "cli/command.h"
#include "cli/numeric_flag.h"
#include "cli/bench/bench_optim.h"

namespace mt {

void add_bench_optim_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<BenchOptimOptions>();
  auto params = std::make_shared<double>(0.0);
  CLI::App* app = root.add_subcommand("bench-optim", "time the optimizer step (global norm + AdamW) over P parameters");
  app->add_option("--params", *params, "number of parameters P (1e9 notation accepted)")->required()->check(positive_real());
  app->add_option("--steps", o->steps, "timed steps (median reported)")->check(integer_in(1));
  app->add_option("--warmup", o->warmup, "untimed steps first")->check(integer_in(0));
  app->add_option("--dtype", o->dtype,
                  "the store's stream dtype: float32 (no copy, the default) or bfloat16 (writes the bf16 copy)")
      ->capture_default_str();
  app->add_option("--region", o->region, "parameters per region")->check(integer_in(1));
  app->add_option("--offload", o->offload,
                  "store.offload: none (default), optimizer or optimizer+master (the state tier on --offload-paths)");
  app->add_option("--offload-paths", o->offload_paths, "the state tier's directories (one per NVMe device)")
      ->delimiter(',');
  app->add_option("--probe-gb", o->probe_gb, "GB the disk probe writes then reads per path (default 4)")
      ->check(positive_real());
  app->add_flag("--json", o->json, "print one JSON object on stdout");
  commands.push_back({app, [o, params] {
                        o->params = static_cast<int64_t>(*params);
                        run_bench_optim(*o);
                      }});
}

}  // namespace mt
