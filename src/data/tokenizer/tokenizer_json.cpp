// Tokenizer::from_directory: reads tokenizer.json (required) and tokenizer_config.json (optional) of a model
// directory. Invariant: a missing or unparsable file raises one mt::Error line naming it.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_depth.h"
#include "core/log.h"
#include "data/tokenizer.h"
#include "data/tokenizer/hf_tokenizer.h"

namespace mt {
namespace {

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  MT_REQUIRE(in, "{}: cannot open the file", path.string());
  std::stringstream text;
  text << in.rdbuf();
  require_json_depth(text.str(), path.string());
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(fmt::format("{}: invalid JSON: {}", path.string(), e.what()));
  }
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_directory(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "tokenizer.json";
  MT_REQUIRE(std::filesystem::is_regular_file(file),
             "{}: no such file (the model directory needs the Hugging Face tokenizer.json)", file.string());
  const std::filesystem::path config_file = dir / "tokenizer_config.json";
  const nlohmann::json config = std::filesystem::exists(config_file) ? read_json(config_file) : nlohmann::json();
  auto tokenizer = std::make_unique<tok::HfTokenizer>(read_json(file), file.string(), config, config_file.string());
  log::debug("tokenizer {}: {} ids", file.string(), tokenizer->vocab_size());
  return tokenizer;
}

}  // namespace mt
