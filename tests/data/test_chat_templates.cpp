// Chat templates against LLaMA-Factory itself: tests/data/fixtures/templates/<name>.json (tools/
// make_template_fixtures.py) hold what LLaMA-Factory 0.9.5 renders with the tokenizer fixtures — the (prompt,
// response) pairs of encode_multiturn and the input_ids/labels of its supervised processor, whole and cut, or the
// refusal of a conversation LLaMA-Factory refuses. Also: template: auto, unknown names, missing tokens, and
// Python-compatible JSON text.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "data/dataset.h"
#include "data/formats/truncation.h"
#include "data/templates/chat_template.h"
#include "data/templates/jinja_chat_template.h"
#include "data/templates/python_json.h"
#include "data/templates/template_renderer.h"
#include "data/tokenizer.h"
#include "fixture.h"

namespace mt {
namespace {

using nlohmann::json;

const std::string kSource = MEGATRAIN_SOURCE_DIR;

std::unique_ptr<Tokenizer> fixture_tokenizer(const std::string& name) {
  return Tokenizer::from_directory(kSource + "/tests/tokenizer/fixtures/" + name);
}

Role role_of(const std::string& name) {
  if (name == "user") return Role::user;
  if (name == "assistant") return Role::assistant;
  if (name == "observation") return Role::observation;
  REQUIRE(name == "function");
  return Role::function;
}

std::vector<int32_t> ids_of(const json& list) { return list.get<std::vector<int32_t>>(); }

// FNV-1a (64 bit) of a file, as hex; tools/make_template_fixtures.py records it for the tokenizer it used.
std::string fnv1a64(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t h = 0xCBF29CE484222325ULL;
  for (char c; in.get(c);) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ULL;
  return fmt::format("{:016x}", h);
}

// The fixture's cases (LLaMA-Factory's pairs and supervised input_ids/labels, whole and cut, or its refusal)
// against our renderer.
void check_cases(const std::string& name, const json& fixture, const TemplateRenderer& renderer) {
  const std::optional<int32_t> efficient_eos = renderer.efficient_eos();
  for (const json& c : fixture["cases"]) {
    INFO("template " << name << ", case " << c["name"].get<std::string>());
    Conversation conversation{c["system"], c["tools"], {}};
    for (const json& t : c["turns"]) conversation.turns.push_back({role_of(t["role"]), t["content"]});
    if (c.contains("error")) {   // LLaMA-Factory refuses this conversation with this template
      INFO("LLaMA-Factory: " << c["error"].get<std::string>());
      CHECK(!test::error_message([&] { renderer.encode(conversation); }).empty());
      continue;
    }
    const std::vector<EncodedPair> pairs = renderer.encode(conversation);
    REQUIRE(pairs.size() == c["pairs"].size());
    for (size_t i = 0; i < pairs.size(); ++i) {
      CHECK(pairs[i].prompt == ids_of(c["pairs"][i][0]));
      CHECK(pairs[i].response == ids_of(c["pairs"][i][1]));
    }
    bool truncated = true;
    const Example full = assemble_example(pairs, c["full"]["cutoff"], false, &truncated, efficient_eos);
    CHECK(!truncated);
    CHECK(full.input_ids == ids_of(c["full"]["input_ids"]));
    CHECK(full.labels == ids_of(c["full"]["labels"]));
    // LLaMA-Factory cuts later pairs too; both rules agree whenever the first pair alone (with the closing EOS of
    // an efficient_eos template) reaches the cutoff.
    const int64_t cutoff = c["cut"]["cutoff"];
    if (static_cast<int64_t>(pairs[0].prompt.size() + pairs[0].response.size() + (efficient_eos ? 1 : 0)) >=
        cutoff) {
      const Example cut = assemble_example(pairs, cutoff, false, &truncated, efficient_eos);
      CHECK(cut.input_ids == ids_of(c["cut"]["input_ids"]));
      CHECK(cut.labels == ids_of(c["cut"]["labels"]));
    }
  }
}

}  // namespace

TEST_CASE("every template renders what LLaMA-Factory renders", "[data][templates]") {
  const std::vector<std::string> names = chat_template_names();
  CHECK(names == std::vector<std::string>{"baichuan2", "chatml", "deepseek", "deepseekcoder", "deepseekr1",
                                          "default", "empty", "gemma", "gemma2", "gemma3", "glm4", "glm4_moe",
                                          "gpt_oss", "intern2", "llama2", "llama3", "llama4", "mistral", "phi", "phi4", "phi4_mini",
                                          "qwen", "qwen3", "qwen3_5", "qwen3_5_nothink", "qwen3_nothink", "yi"});
  for (const std::string& name : names) {
    std::ifstream in(kSource + "/tests/data/fixtures/templates/" + name + ".json");
    REQUIRE(in.good());
    const json fixture = json::parse(in);
    const std::string tokenizer_dir = kSource + "/" + fixture["tokenizer"].get<std::string>();
    INFO("the tokenizer fixture changed since the template fixtures were made: rerun tools/make_template_fixtures.py");
    REQUIRE(fnv1a64(tokenizer_dir + "/tokenizer.json") == fixture["tokenizer_fnv1a64"].get<std::string>());
    const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_directory(tokenizer_dir);
    const TemplateRenderer renderer(find_chat_template(name), *tokenizer);
    CHECK(renderer.chat_template().efficient_eos == fixture["efficient_eos"].get<bool>());
    check_cases(name, fixture, renderer);
  }
}

TEST_CASE("template: jinja parses the tokenizer's chat template as LLaMA-Factory does", "[data][templates][jinja]") {
  // tests/data/fixtures/templates/jinja_<name>.json: LLaMA-Factory with no template named, the tokenizer fixture
  // given tests/data/fixtures/jinja/templates/<name>.jinja as its chat_template (parse_template).
  size_t parsed = 0;
  for (const char* name : {"qwen2_5", "qwen3", "llama3", "mistral", "gemma3", "phi4", "yi", "deepseek_r1_distill"}) {
    INFO("jinja_" << name);
    std::ifstream in(kSource + "/tests/data/fixtures/templates/jinja_" + name + ".json");
    REQUIRE(in.good());
    const json fixture = json::parse(in);
    const std::string tokenizer_dir = kSource + "/" + fixture["tokenizer"].get<std::string>();
    REQUIRE(fnv1a64(tokenizer_dir + "/tokenizer.json") == fixture["tokenizer_fnv1a64"].get<std::string>());
    const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_directory(tokenizer_dir);
    TokenizerChatTemplate source;
    source.file = fixture["chat_template"];
    std::ifstream template_in(kSource + "/" + source.file);
    source.source.assign(std::istreambuf_iterator<char>(template_in), {});
    for (const auto& [k, v] : fixture["special_tokens"].items()) source.special_tokens.emplace_back(k, jinja::from_json(v));
    if (fixture.contains("error")) {
      const std::string error = test::error_message([&] { chat_template_from_jinja(source, *tokenizer); });
      INFO(error);
      CHECK(error.find(fixture["error"].get<std::string>()) != std::string::npos);
      continue;
    }
    const ChatTemplate parsed_template = chat_template_from_jinja(source, *tokenizer);
    CHECK(parsed_template.default_system == fixture["default_system"].get<std::string>());
    CHECK(parsed_template.empty_thought == fixture["reasoning"].get<bool>());
    const TemplateRenderer renderer(parsed_template, *tokenizer);
    check_cases(std::string("jinja_") + name, fixture, renderer);
    ++parsed;
  }
  CHECK(parsed == 5);
}

TEST_CASE("template: jinja reads chat_template.jinja, else tokenizer_config.json's chat_template", "[data][templates][jinja]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "mt_jinja_template_read";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto write = [&](const char* file, const std::string& text) { std::ofstream(dir / file) << text; };
  CHECK(test::error_message([&] { read_tokenizer_chat_template(dir); }) ==
        "dataset.template jinja: the tokenizer in " + dir.string() + " has no chat template (no chat_template.jinja "
        "and no chat_template in tokenizer_config.json); name a template instead");
  write("tokenizer_config.json", R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>", "pad_token": null,
    "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ bos_token }}"}]})");
  TokenizerChatTemplate t = read_tokenizer_chat_template(dir);
  CHECK(t.source == "D{{ bos_token }}");
  CHECK(t.file == (dir / "tokenizer_config.json").string() + " (chat_template 'default')");
  REQUIRE(t.special_tokens.size() == 2);
  CHECK(t.special_tokens[0].first == "bos_token");
  CHECK(t.special_tokens[0].second.string == "<s>");
  write("chat_template.jinja", "{{ messages[0].content }}");
  t = read_tokenizer_chat_template(dir);
  CHECK(t.source == "{{ messages[0].content }}");
  CHECK(t.file == (dir / "chat_template.jinja").string());
  std::filesystem::remove_all(dir);
}

TEST_CASE("template: auto follows the model family and the tokenizer's specials", "[data][templates]") {
  CHECK(auto_template_name("qwen2", *fixture_tokenizer("qwen2")) == "qwen");
  CHECK(auto_template_name("qwen3", *fixture_tokenizer("qwen2")) == "qwen3");
  for (const char* family : {"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"})
    CHECK(auto_template_name(family, *fixture_tokenizer("qwen2")) == "qwen3_5");
  CHECK(auto_template_name("mistral", *fixture_tokenizer("mistral")) == "mistral");
  CHECK(auto_template_name("llama", *fixture_tokenizer("llama3")) == "llama3");
  CHECK(auto_template_name("llama", *fixture_tokenizer("llama2")) == "llama2");
  CHECK(auto_template_name("gemma2", *fixture_tokenizer("gemma")) == "gemma2");
  CHECK(auto_template_name("gemma3", *fixture_tokenizer("gemma")) == "gemma3");
  CHECK(auto_template_name("gemma3_text", *fixture_tokenizer("gemma")) == "gemma2");
  CHECK(auto_template_name("glm4", *fixture_tokenizer("glm4")) == "glm4");
  CHECK(auto_template_name("glm4_moe", *fixture_tokenizer("glm4")) == "glm4_moe");
  CHECK(auto_template_name("gpt_oss", *fixture_tokenizer("gpt_oss")) == "gpt_oss");
  CHECK(auto_template_name("qwen3_moe", *fixture_tokenizer("qwen2")) == "qwen3");
  CHECK(auto_template_name("qwen2_moe", *fixture_tokenizer("qwen2")) == "qwen");
  CHECK(auto_template_name("mixtral", *fixture_tokenizer("mistral")) == "mistral");
  for (const char* family : {"llama4", "llama4_text"})
    CHECK(auto_template_name(family, *fixture_tokenizer("llama4")) == "llama4");
  CHECK(auto_template_name("internlm2", *fixture_tokenizer("internlm2")) == "intern2");
  CHECK(auto_template_name("baichuan", *fixture_tokenizer("baichuan2")) == "baichuan2");
  // One family, three templates: Phi-3/3.5 (<|user|>... with BOS <s>), Phi-4 (<|im_start|>, <|im_sep|>),
  // Phi-4-mini (<|user|>... with BOS <|endoftext|>).
  CHECK(auto_template_name("phi3", *fixture_tokenizer("phi3")) == "phi");
  CHECK(auto_template_name("phi3", *fixture_tokenizer("phi4")) == "phi4");
  CHECK(auto_template_name("phi3", *fixture_tokenizer("phi4_mini")) == "phi4_mini");
  const std::string known = "baichuan2, chatml, deepseek, deepseekcoder, deepseekr1, default, empty, gemma, gemma2, "
                            "gemma3, glm4, glm4_moe, gpt_oss, intern2, llama2, llama3, llama4, mistral, phi, phi4, phi4_mini, qwen, "
                            "qwen3, qwen3_5, qwen3_5_nothink, qwen3_nothink, yi";
  CHECK(test::error_message([] { auto_template_name("llama", *fixture_tokenizer("gpt2")); }) ==
        "dataset.template: auto cannot tell the chat template of this llama model from its tokenizer; set "
        "dataset.template to one of " + known);
  CHECK(test::error_message([] { auto_template_name("phi3", *fixture_tokenizer("qwen2")); }) ==
        "dataset.template: auto cannot tell the chat template of this phi3 model from its tokenizer; set "
        "dataset.template to one of " + known);
}

TEST_CASE("a template whose tokens the tokenizer lacks is refused", "[data][templates]") {
  const auto llama2 = fixture_tokenizer("llama2");
  CHECK(test::error_message([&] { TemplateRenderer(find_chat_template("chatml"), *llama2); }) ==
        "dataset.template 'chatml' needs the token <|im_end|> which the model's tokenizer does not have; choose the "
        "template that matches the model");
  // <|eom_id|> is a stop word of llama3 that no slot writes: Llama 3.0 tokenizers lack it, and that is fine.
  CHECK(test::error_message([] { TemplateRenderer(find_chat_template("llama3"), *fixture_tokenizer("llama3")); })
            .empty());
  CHECK(test::error_message([] { find_chat_template("vicuna"); }).find("unknown template 'vicuna'") !=
        std::string::npos);
}

TEST_CASE("the built-in text demo loads with the demo model's tokenizer", "[data][templates]") {
  const auto tokenizer = Tokenizer::from_directory(kSource + "/configs/models/demo");
  DatasetConfig config;
  config.name = "alpaca_en_demo,alpaca_zh_demo";
  config.dataset_dir = kSource + "/data";
  config.max_seq_len = 128;
  config.template_name = "chatml";
  DatasetStats stats;
  const auto examples = load_datasets(config, tokenizer->vocab_size(), TextOptions{tokenizer.get(), "llama"}, &stats);
  CHECK(stats.examples >= 600);
  CHECK(stats.truncated == 0);
  CHECK(stats.dropped == 0);
  CHECK(stats.skipped == 0);
  CHECK(tokenizer->decode(examples[0].input_ids).starts_with("<|im_start|>user\n"));
  const std::vector<int32_t>& ids = examples[0].input_ids;
  CHECK(tokenizer->decode(std::vector<int32_t>(ids.end() - 2, ids.end())) == "<|im_end|>\n");
}

TEST_CASE("stop words lose their strip rules, as LLaMA-Factory's fix_special_tokens leaves them", "[data][templates]") {
  // Phi-3's <|end|> strips the white space on its right; LLaMA-Factory re-adds it as the EOS (a plain special
  // token), so "<|end|>\n" keeps its "\n" there. <|user|>, no stop word, keeps its rule.
  const auto phi3 = fixture_tokenizer("phi3");
  const int32_t end = *phi3->token_to_id("<|end|>"), user = *phi3->token_to_id("<|user|>");
  CHECK(phi3->encode("<|end|>\n") == std::vector<int32_t>{end});
  const auto plain = phi3->with_plain_special_tokens({"<|end|>", "not a token"});
  const std::vector<int32_t> ids = plain->encode("<|end|>\n");
  CHECK(ids.size() > 1);
  CHECK(ids[0] == end);
  CHECK(plain->encode("<|user|>\n") == std::vector<int32_t>{user});
  CHECK(plain->eos_id() == phi3->eos_id());
  CHECK(plain->vocab_size() == phi3->vocab_size());
}

TEST_CASE("efficient_eos templates end examples with one EOS and refuse train_on_prompt", "[data][templates]") {
  // LLaMA-Factory's efficient_eos: no EOS after each answer; a later prompt's first token is labelled EOS, and one
  // EOS closes the example within max_seq_len.
  const std::vector<EncodedPair> pairs = {{{1, 2}, {3, 4}}, {{5, 6}, {7}}};
  bool truncated = true;
  const Example whole = assemble_example(pairs, 8, false, &truncated, 99);
  CHECK(!truncated);
  CHECK(whole.input_ids == std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 99});
  CHECK(whole.labels == std::vector<int32_t>{kIgnoreIndex, kIgnoreIndex, 3, 4, 99, kIgnoreIndex, 7, 99});
  const Example cut = assemble_example(pairs, 7, false, &truncated, 99);
  CHECK(truncated);
  CHECK(cut.input_ids == std::vector<int32_t>{1, 2, 3, 4, 99});
  CHECK(cut.labels == std::vector<int32_t>{kIgnoreIndex, kIgnoreIndex, 3, 4, 99});

  const auto tokenizer = Tokenizer::from_directory(kSource + "/configs/models/demo");
  DatasetConfig config;
  config.name = "alpaca_en_demo";
  config.dataset_dir = kSource + "/data";
  config.template_name = "baichuan2";
  config.train_on_prompt = true;
  CHECK(test::error_message([&] {
          load_datasets(config, tokenizer->vocab_size(), TextOptions{tokenizer.get(), "llama"}, nullptr);
        }).find("dataset.train_on_prompt: the chat template 'baichuan2' does not support it") != std::string::npos);
}

TEST_CASE("python_json_dumps writes what Python's json.dumps(ensure_ascii=False) writes", "[data][templates]") {
  using nlohmann::ordered_json;
  const ordered_json v = ordered_json::parse(
      R"({"b": 1, "a": [1.5, 1e16, 1e15, 0.0001, 1e-05, -0.0, 100.0, 2.5e-300], "s": "é\n\"\\\t\u0001", "n": null,
          "t": true, "e": {}, "l": []})");
  CHECK(python_json_dumps(v) ==
        R"({"b": 1, "a": [1.5, 1e+16, 1000000000000000.0, 0.0001, 1e-05, -0.0, 100.0, 2.5e-300], )"
        R"("s": "é\n\"\\\t\u0001", "n": null, "t": true, "e": {}, "l": []})");
  CHECK(python_json_dumps(ordered_json::parse(R"({"k": [1, {"x": []}]})"), 2) ==
        "{\n  \"k\": [\n    1,\n    {\n      \"x\": []\n    }\n  ]\n}");
}

}  // namespace mt
