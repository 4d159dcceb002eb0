// `megatrain tokenize --model DIR [--decode] [--add-special-tokens]`: the model's tokenizer.json as a filter.
// Invariant: exactly one output line per input line — encode: the line's text (without its "\n") becomes a JSON
// array of ids; --decode: a JSON array of ids becomes the decoded text as one JSON string.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/json_depth.h"
#include "data/tokenizer.h"

namespace mt {
namespace {

struct TokenizeOptions {
  std::string model;
  bool decode = false;
  bool add_special_tokens = false;
};

std::vector<int32_t> parse_ids(const std::string& line, size_t line_number) {
  require_json_depth(line, fmt::format("stdin line {}", line_number));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error&) {
    throw Error(fmt::format("stdin line {}: expected a JSON array of token ids, got '{}'", line_number, line));
  }
  MT_REQUIRE(j.is_array(), "stdin line {}: expected a JSON array of token ids, got '{}'", line_number, line);
  std::vector<int32_t> ids;
  for (const auto& id : j) {
    MT_REQUIRE(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() <= INT32_MAX,
               "stdin line {}: token id {} is not a non-negative integer", line_number, id.dump());
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

void run_tokenize(const TokenizeOptions& o) {
  const auto tokenizer = Tokenizer::from_directory(o.model);
  std::ios::sync_with_stdio(false);
  std::string line, out;
  size_t line_number = 0;
  while (std::getline(std::cin, line)) {
    ++line_number;
    if (o.decode) {
      const std::vector<int32_t> ids = parse_ids(line, line_number);
      out += nlohmann::json(tokenizer->decode(ids)).dump();
    } else {
      out += fmt::format("[{}]", fmt::join(tokenizer->encode(line, o.add_special_tokens), ","));
    }
    out += '\n';
    if (out.size() >= (1 << 16)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

void add_tokenize_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* app = root.add_subcommand(
      "tokenize", "encode stdin with a model's tokenizer.json: one line of text in, one JSON array of ids out");
  app->add_option("--model", o->model, "model directory holding tokenizer.json (and tokenizer_config.json)")
      ->required();
  app->add_flag("--decode", o->decode, "read one JSON array of ids per line, write the text as a JSON string");
  app->add_flag("--add-special-tokens", o->add_special_tokens,
                "apply the tokenizer's post-processor when encoding (e.g. Llama's BOS)");
  commands.push_back({app, [o] { run_tokenize(*o); }});
}

}  // namespace mt
