// Parity with the `tokenizers` library on every case of every fixture in tests/tokenizer/fixtures (written by
// tools/make_tokenizer_fixtures.py): encode with and without special tokens, decode with and without skipping them,
// and decode without the first id (which may leave a partial UTF-8 character).
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "data/tokenizer.h"

namespace {

const std::string fixtures = MEGATRAIN_SOURCE_DIR "/tests/tokenizer/fixtures/";

std::string unhex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

std::vector<nlohmann::json> read_cases(const std::string& kind) {
  std::ifstream in(fixtures + kind + "/cases.jsonl");
  REQUIRE(in);
  std::vector<nlohmann::json> cases;
  for (std::string line; std::getline(in, line);) cases.push_back(nlohmann::json::parse(line));
  return cases;
}

}  // namespace

TEST_CASE("encode and decode agree with tokenizers on every fixture case") {
  const std::string kind =
      GENERATE(as<std::string>{}, "qwen2", "llama3", "gpt2", "llama2", "mistral", "splits", "prefix_space");
  const auto tokenizer = mt::Tokenizer::from_directory(fixtures + kind);
  const std::vector<nlohmann::json> cases = read_cases(kind);
  CHECK(cases.size() >= 45);
  for (const nlohmann::json& c : cases) {
    const std::string input = c.contains("bytes_hex") ? unhex(c["bytes_hex"]) : c["text"].get<std::string>();
    INFO(kind << " case " << c["text"].dump());
    CHECK(tokenizer->encode(input, false) == c["ids"].get<std::vector<int32_t>>());
    CHECK(tokenizer->encode(input, true) == c["ids_special"].get<std::vector<int32_t>>());
    CHECK(tokenizer->decode(c["ids"].get<std::vector<int32_t>>()) == c["decoded"].get<std::string>());
    CHECK(tokenizer->decode(c["ids_special"].get<std::vector<int32_t>>(), true) == c["decoded_skip"].get<std::string>());
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const std::span<const int32_t> tail = ids.empty() ? std::span<const int32_t>() : std::span(ids).subspan(1);
    CHECK(tokenizer->decode(tail) == c["decoded_tail"].get<std::string>());
  }
}
