// Loading tokenizer.json / tokenizer_config.json: one-line errors naming the file and the part that is wrong,
// token_to_id, vocab_size and the special ids of tokenizer_config.json.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "core/error.h"
#include "data/tokenizer.h"

namespace {

namespace fs = std::filesystem;
const fs::path fixtures = MEGATRAIN_SOURCE_DIR "/tests/tokenizer/fixtures";

// A fresh directory, removed with its files at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() / ("mt_tokenizer_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path / name) << text; }
};

nlohmann::json fixture_json(const std::string& kind) {
  std::ifstream in(fixtures / kind / "tokenizer.json");
  return nlohmann::json::parse(in);
}

// The error message of loading `tokenizer` (and `config` when given) from a fresh directory.
std::string load_error(const nlohmann::json& tokenizer, const std::string& config = "") {
  TempDir dir;
  dir.write("tokenizer.json", tokenizer.dump());
  if (!config.empty()) dir.write("tokenizer_config.json", config);
  try {
    mt::Tokenizer::from_directory(dir.path);
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("a missing or malformed tokenizer.json is an error naming the file") {
  TempDir dir;
  CHECK_THROWS_WITH(mt::Tokenizer::from_directory(dir.path / "absent"),
                    mt_test::contains((dir.path / "absent" / "tokenizer.json").string()) &&
                        mt_test::contains("no such file"));
  dir.write("tokenizer.json", "{\"model\": {\"type\": \"BPE\",");
  CHECK_THROWS_WITH(mt::Tokenizer::from_directory(dir.path),
                    mt_test::contains((dir.path / "tokenizer.json").string() + ": invalid JSON"));
}

TEST_CASE("unsupported model types are named in the error") {
  for (const std::string type : {"WordPiece", "Unigram", "WordLevel"}) {
    nlohmann::json j = fixture_json("gpt2");
    j["model"]["type"] = type;
    const std::string message = load_error(j);
    CHECK_THAT(message, mt_test::contains("tokenizer.json: model: model type '" + type + "' is not supported"));
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("unsupported components and broken fields name their JSON path") {
  nlohmann::json j = fixture_json("qwen2");
  j["pre_tokenizer"]["pretokenizers"][1]["type"] = "Whitespace";
  CHECK_THAT(load_error(j), mt_test::contains("pre_tokenizer.pretokenizers[1]: unsupported pre_tokenizer type "
                                              "'Whitespace'"));
  j = fixture_json("qwen2");
  j["normalizer"]["type"] = "NFKD";
  CHECK_THAT(load_error(j), mt_test::contains("normalizer: unsupported normalizer type 'NFKD'"));
  j = fixture_json("llama2");
  j["decoder"]["decoders"][2]["type"] = "CTC";
  CHECK_THAT(load_error(j), mt_test::contains("decoder.decoders[2]: unsupported decoder type 'CTC'"));
  j = fixture_json("llama2");
  j["post_processor"]["type"] = "RobertaProcessing";
  CHECK_THAT(load_error(j), mt_test::contains("post_processor: unsupported post_processor type 'RobertaProcessing'"));
  j = fixture_json("qwen2");
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  CHECK_THAT(load_error(j), mt_test::contains("pre_tokenizer.pretokenizers[0].pattern: bad regex '(unclosed'"));
  j = fixture_json("gpt2");
  j["model"]["merges"][3] = "nosuch token";
  CHECK_THAT(load_error(j), mt_test::contains("model.merges[3]: \"nosuch\" is not in the vocab"));
  j = fixture_json("gpt2");
  j["model"]["merges"][0] = "three part merge";
  CHECK_THAT(load_error(j), mt_test::contains("model.merges[0]: expected two tokens separated by one space"));
  j = fixture_json("llama2");
  j["model"]["unk_token"] = "<nope>";
  CHECK_THAT(load_error(j), mt_test::contains("model: unk_token \"<nope>\" is not in the vocab"));
  j = fixture_json("gpt2");
  j.erase("model");
  CHECK_THAT(load_error(j), mt_test::contains("tokenizer.json: missing key 'model'"));
}

TEST_CASE("a special token of tokenizer_config.json that is not in the vocabulary is an error") {
  CHECK_THAT(load_error(fixture_json("gpt2"), R"({"eos_token": "<|nope|>"})"),
             mt_test::contains("tokenizer_config.json: eos_token: token \"<|nope|>\" is not in the vocabulary"));
  CHECK_THAT(load_error(fixture_json("gpt2"), "{ bad"), mt_test::contains("tokenizer_config.json: invalid JSON"));
}

TEST_CASE("token_to_id and vocab_size cover the model vocab and the added tokens") {
  const auto qwen2 = mt::Tokenizer::from_directory(fixtures / "qwen2");
  CHECK(qwen2->token_to_id("<|endoftext|>") == 900);
  CHECK(qwen2->token_to_id("<|im_end|>") == 902);
  CHECK(qwen2->token_to_id("Ġt") == fixture_json("qwen2")["model"]["vocab"]["Ġt"].get<int32_t>());
  CHECK(qwen2->token_to_id("!") == 0);
  CHECK_FALSE(qwen2->token_to_id("no such token"));
  CHECK(qwen2->vocab_size() == 903);
  const auto mistral = mt::Tokenizer::from_directory(fixtures / "mistral");
  CHECK(mistral->token_to_id("<0x0A>") == 13);
  CHECK(mistral->token_to_id("[/INST]") == 1160);
  CHECK(mistral->vocab_size() == 1161);
}

TEST_CASE("special ids come from tokenizer_config.json, as strings or AddedToken objects") {
  const auto qwen2 = mt::Tokenizer::from_directory(fixtures / "qwen2");
  CHECK_FALSE(qwen2->bos_id());
  CHECK(qwen2->eos_id() == 902);
  CHECK(qwen2->pad_id() == 900);
  const auto gpt2 = mt::Tokenizer::from_directory(fixtures / "gpt2");  // bos_token is an AddedToken object
  CHECK(gpt2->bos_id() == 700);
  CHECK(gpt2->eos_id() == 700);
  CHECK_FALSE(gpt2->pad_id());
  const auto llama2 = mt::Tokenizer::from_directory(fixtures / "llama2");
  CHECK(llama2->bos_id() == 1);
  CHECK(llama2->eos_id() == 2);
  CHECK_FALSE(llama2->pad_id());

  TempDir dir;  // no tokenizer_config.json: no special ids
  fs::copy_file(fixtures / "llama3" / "tokenizer.json", dir.path / "tokenizer.json");
  const auto bare = mt::Tokenizer::from_directory(dir.path);
  CHECK_FALSE(bare->bos_id());
  CHECK_FALSE(bare->eos_id());
  CHECK_FALSE(bare->pad_id());
}

TEST_CASE("decoding an id outside the vocabulary is an error") {
  const auto gpt2 = mt::Tokenizer::from_directory(fixtures / "gpt2");
  const std::vector<int32_t> ids{64, 706};
  CHECK_THROWS_WITH(gpt2->decode(ids), mt_test::contains("token id 706 is not in the vocabulary (706 ids)"));
}
