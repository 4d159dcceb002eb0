// `megatrain preview-data --config FILE [--set section.key=value ...] [-n N]`: the first N examples as training sees
// them (template applied, truncated, not packed; a preference pair as its chosen then its rejected sequence, a KTO
// example as its completion with its tag, then its KL sequence), trained
// spans green on a terminal, «in guillemets» otherwise.
// Invariant: reads the same config, model directory and data as `train`, and writes nothing.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/numeric_flag.h"
#include "cli/train/training_data.h"
#include "config/config.h"
#include "model/model_source.h"
#include "model/model_spec.h"

namespace mt {
namespace {

// Text of ids[begin, end): decoded when there is a tokenizer, else the ids themselves.
std::string span_text(const TrainingData& data, const std::vector<int32_t>& ids, size_t begin, size_t end) {
  const std::span<const int32_t> span(ids.data() + begin, end - begin);
  if (data.tokenizer) return data.tokenizer->decode(span, false);
  std::string out;
  for (const int32_t id : span) out += fmt::format("{} ", id);
  return out;
}

void preview(const Config& c, int64_t count) {
  const ModelSource source = resolve_model_source(c.model.name);
  const ModelSpec spec = load_model_spec(source.config_json, c.model.trust_remote_code);
  const TrainingData data = load_training_data(c, source, spec, false);
  const bool tty = ::isatty(::fileno(stdout)) != 0;
  const char* open = tty ? "\033[32m" : "«";
  const char* close = tty ? "\033[0m" : "»";
  // One sequence: its header line (`what` and its counts), then its text with the trained spans marked.
  const auto show = [&](const std::string& what, const std::vector<int32_t>& ids, const std::vector<int32_t>& labels) {
    int64_t trained = 0;
    for (const int32_t l : labels) trained += l != kIgnoreIndex;
    fmt::print("=== {}: {} tokens, {} trained\n", what, ids.size(), trained);
    std::string text;
    for (size_t begin = 0; begin < ids.size();) {
      const bool is_trained = labels[begin] != kIgnoreIndex;
      size_t end = begin;
      while (end < ids.size() && (labels[end] != kIgnoreIndex) == is_trained) ++end;
      const std::string piece = span_text(data, ids, begin, end);
      text += is_trained ? open + piece + close : piece;
      begin = end;
    }
    fmt::print("{}\n", text);
  };
  const auto shown = std::min<int64_t>(count, static_cast<int64_t>(data.examples.size()));
  for (int64_t i = 0; i < shown; ++i) {
    const Example& e = data.examples[static_cast<size_t>(i)];
    const std::string what = fmt::format("{} {} of {}", e.is_pair() ? "pair" : "example", i + 1, data.examples.size());
    if (e.is_kto()) {
      show(what + (e.desirable ? ", desirable" : ", undesirable"), e.input_ids, e.labels);
      show(what + ", KL sequence", e.kl_ids, e.kl_labels);
      continue;
    }
    if (!e.is_pair()) {
      show(what, e.input_ids, e.labels);
      continue;
    }
    show(what + ", chosen", e.input_ids, e.labels);
    show(what + ", rejected", e.rejected_ids, e.rejected_labels);
  }
  const DatasetStats& s = data.stats;
  fmt::print("=== {} examples, {} tokens; {} truncated to {} tokens, {} dropped with no trained token, {} records "
             "skipped\n",
             s.examples, s.tokens, s.truncated, c.dataset.max_seq_len, s.dropped, s.skipped);
  std::fflush(stdout);
}

}  // namespace

void add_preview_data_command(CLI::App& root, std::vector<Command>& commands) {
  auto config_file = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  auto count = std::make_shared<int64_t>(3);
  CLI::App* app = root.add_subcommand("preview-data", "print the first examples as training sees them");
  app->add_option("--config", *config_file, "run configuration (YAML)")->required();
  app->add_option("--set", *overrides, "override one key: section.key=value (repeatable)");
  app->add_option("-n", *count, "how many examples to print (default 3)")->check(integer_in(0));
  commands.push_back({app, [=] { preview(load_config(*config_file, *overrides), *count); }});
}

}  // namespace mt
