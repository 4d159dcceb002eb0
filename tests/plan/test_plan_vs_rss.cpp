// The plan against reality on the CPU backend: a small random-init run (45.6 M parameters, fp32, so the host
// store dominates the process) is started as a child process; its peak RSS (wait4's ru_maxrss) above that of
// the same run on the tiny demo model (the process's own baseline: libraries, MPI, CUDA runtime where built)
// must be within 10% of the plan's host figure for the CPU backend, above the tiny model's plan.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "catch.h"
#include "cli/train/preflight.h"
#include "config/config.h"
#include "plan/memory_plan.h"

namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "mt_plan_rss.XXXXXX").string();
    REQUIRE(mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempDir() { fs::remove_all(path); }
};

// Runs argv with stdout+stderr to `log`; returns {exit status, peak RSS in bytes}; kills it after `limit`.
std::pair<int, int64_t> run_measured(const std::vector<std::string>& args, const fs::path& log,
                                     std::chrono::seconds limit) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  struct rusage ru {};
  while (wait4(pid, &status, WNOHANG, &ru) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &ru);
      FAIL("megatrain did not finish within the time limit");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, static_cast<int64_t>(ru.ru_maxrss) * 1024};
}

}  // namespace

TEST_CASE("plan's host bytes within 10% of the peak RSS of a CPU run", "[plan][rss]") {
  TempDir work;
  const fs::path tiny = MEGATRAIN_SOURCE_DIR "/configs/models/demo";
  const fs::path model = work.path / "model";
  fs::copy(tiny, model);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(model / "config.json"));
  cfg["vocab_size"] = 32000;
  cfg["hidden_size"] = 512;
  cfg["intermediate_size"] = 1408;
  cfg["num_attention_heads"] = 8;
  cfg["num_key_value_heads"] = 8;
  std::ofstream(model / "config.json") << cfg.dump(2);
  setenv("MEGATRAIN_BACKEND", "cpu", 1);

  // Peak RSS and planned host bytes of the demo config's run with model.name = `dir`.
  auto measure = [&](const fs::path& dir, const std::string& name) {
    const std::vector<std::string> overrides = {
        "model.name=" + dir.string(), "model.dtype=float32", "dataset.dataset_dir=" MEGATRAIN_SOURCE_DIR "/data",
        "dataset.max_seq_len=64", "training.batch_size=2", "training.num_steps=2",
        "training.output_dir=" + (work.path / ("out-" + name)).string()};
    std::vector<std::string> args = {MEGATRAIN_BINARY_DIR "/megatrain", "train", "--config",
                                     MEGATRAIN_SOURCE_DIR "/configs/demo.yaml"};
    for (const std::string& o : overrides) args.insert(args.end(), {"--set", o});
    const fs::path log_file = work.path / ("log-" + name);
    const auto [rc, peak_rss] = run_measured(args, log_file, std::chrono::seconds(240));
    std::ifstream log(log_file);
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    INFO(text);
    REQUIRE(rc == 0);
    const mt::Config c = mt::load_config(MEGATRAIN_SOURCE_DIR "/configs/demo.yaml", overrides);
    const mt::ModelSpec spec = mt::load_model_spec(dir / "config.json");
    mt::RunShape run = mt::run_shape(c, 1);
    mt::resolve_auto(spec, run, 0, true);  // as preflight on the CPU backend
    return std::pair<double, double>{static_cast<double>(peak_rss),
                                     static_cast<double>(mt::cpu_backend_host_bytes(spec, run))};
  };
  const auto [base_rss, base_plan] = measure(tiny, "tiny");
  const auto [rss, plan] = measure(model, "small");
  const double measured = rss - base_rss, planned = plan - base_plan;
  INFO("planned " << planned / (1 << 20) << " MiB, measured " << measured / (1 << 20) << " MiB above the baseline ("
                  << base_rss / (1 << 20) << " MiB peak RSS on the tiny model)");
  CHECK(std::abs(measured - planned) <= 0.10 * planned);
}
