// The exported chat_template round-trips: Python's jinja2 (as transformers' apply_chat_template sets it up: trim_blocks,
// lstrip_blocks) renders the Jinja we write into text whose tokens are exactly our template's for the same
// conversation; tokenizer_config.json and generation_config.json get the trained EOS, pad and stop words. Skipped,
// with a note, where python3 has no jinja2 (Debian: python3-jinja2).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "data/fixture.h"
#include "data/templates/chat_template.h"
#include "data/templates/inference_files.h"
#include "data/templates/template_renderer.h"
#include "data/tokenizer.h"

using namespace mt;
using nlohmann::json;

namespace {

const std::string kSource = MEGATRAIN_SOURCE_DIR;

bool have_jinja2() { return std::system("python3 -c 'import jinja2' >/dev/null 2>&1") == 0; }

// jinja2's rendering of `chat_template` for `messages`, with the tokenizer's bos/eos as transformers passes them.
std::string render_with_jinja2(const test::TempDir& dir, const std::string& chat_template, const json& messages) {
  dir.write("template.jinja", chat_template);
  dir.write("messages.json", messages.dump());
  dir.write("render.py", R"(import json, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
template = env.from_string(open(sys.argv[1], encoding="utf-8").read())
text = template.render(messages=json.load(open(sys.argv[2], encoding="utf-8")), add_generation_prompt=False)
open(sys.argv[3], "w", encoding="utf-8").write(text)
)");
  const std::string command = "python3 " + (dir.path() / "render.py").string() + " " +
                              (dir.path() / "template.jinja").string() + " " + (dir.path() / "messages.json").string() +
                              " " + (dir.path() / "rendered.txt").string();
  REQUIRE(std::system(command.c_str()) == 0);
  std::ifstream in(dir.path() / "rendered.txt", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("the exported chat template renders our template's tokens through jinja2", "[data][export]") {
  if (!have_jinja2()) {
    WARN("python3 with jinja2 not found (Debian: python3-jinja2): the round trip is not checked");
    return;
  }
  // Byte-level BPE tokenizers: a rendered text tokenizes the same whole or slot by slot where no pre-token spans a
  // slot boundary (answers here start with a space). A SentencePiece tokenizer would not: it opens every separately
  // encoded piece with '▁', in LLaMA-Factory's training as in ours, but not inside one rendered text.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"chatml", "qwen2"}, {"qwen", "qwen2"},     {"yi", "qwen2"},            {"llama3", "llama3"},
      {"llama2", "qwen2"}, {"deepseek", "qwen2"}, {"deepseekcoder", "qwen2"}, {"qwen3_nothink", "qwen2"}};
  for (const auto& [name, tokenizer_name] : cases)
    for (const std::string system : {"", "Be brief, don't ramble \\ please."}) {
      INFO("template " << name << " system '" << system << "'");
      const auto tokenizer = Tokenizer::from_directory(kSource + "/tests/tokenizer/fixtures/" + tokenizer_name);
      const ChatTemplate& t = find_chat_template(name);
      Conversation c;
      c.system = system;
      c.turns = {{Role::user, "Hi 'there'\nfriend"}, {Role::assistant, " Hello!"},
                 {Role::user, "2+2?"}, {Role::assistant, " 4"}};
      std::vector<int32_t> ours;
      for (const EncodedPair& p : TemplateRenderer(t, *tokenizer).encode(c)) {
        ours.insert(ours.end(), p.prompt.begin(), p.prompt.end());
        ours.insert(ours.end(), p.response.begin(), p.response.end());
      }
      json messages = json::array();
      if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
      for (const Turn& turn : c.turns)
        messages.push_back({{"role", turn.role == Role::user ? "user" : "assistant"}, {"content", turn.content}});
      test::TempDir dir;
      const std::string text = render_with_jinja2(dir, jinja_chat_template(t, *tokenizer), messages);
      const auto plain = tokenizer->with_plain_special_tokens(t.stop_words);
      CHECK(plain->encode(text) == ours);
    }
}

TEST_CASE("the export's tokenizer_config and generation_config name the trained EOS and stop words", "[data][export]") {
  test::TempDir dir;
  const std::string fixture = kSource + "/tests/tokenizer/fixtures/qwen2";
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(fixture + "/" + file, dir.path() / file);
  dir.write("generation_config.json", R"({"do_sample": true, "eos_token_id": 1})");
  const auto tokenizer = Tokenizer::from_directory(dir.path());
  write_inference_files(dir.path(), find_chat_template("qwen"), *tokenizer);
  std::ifstream config_in(dir.path() / "tokenizer_config.json");
  const json config = json::parse(config_in);
  CHECK(config.at("eos_token") == "<|im_end|>");  // qwen replaces the EOS with its first stop word
  CHECK(config.at("chat_template").get<std::string>().find("You are Qwen") != std::string::npos);
  CHECK(config.contains("pad_token"));
  std::ifstream generation_in(dir.path() / "generation_config.json");
  const json generation = json::parse(generation_in);
  CHECK(generation.at("do_sample") == true);  // kept
  const int32_t im_end = *tokenizer->token_to_id("<|im_end|>");
  CHECK((generation.at("eos_token_id") == json(im_end) || generation.at("eos_token_id").front() == im_end));
}
