// Text formats: alpaca and sharegpt records -> Conversations (LLaMA-Factory's columns, tags and defaults), and every
// bad-input rule: malformed JSON names file:line, a missing column names the entry and column, broken conversations
// are skipped and counted, wrong field types are errors.
#include <nlohmann/json.hpp>

#include "byte_tokenizer.h"
#include "catch.h"
#include "data/dataset.h"
#include "data/formats/record_converter.h"
#include "fixture.h"

namespace mt {
namespace {

using nlohmann::ordered_json;

DatasetEntry entry_of(const std::string& formatting, std::map<std::string, std::string> columns = {},
                      std::map<std::string, std::string> tags = {}) {
  DatasetEntry e;
  e.name = "d";
  e.file = "d.json";
  e.formatting = formatting;
  e.columns = std::move(columns);
  e.tags = std::move(tags);
  return e;
}

Conversation convert(const DatasetEntry& entry, const char* record) {
  const ConvertedRecord r = RecordConverter(entry).convert(ordered_json::parse(record));
  REQUIRE(r.conversation.has_value());
  return *r.conversation;
}

std::string skip_of(const DatasetEntry& entry, const char* record) {
  const ConvertedRecord r = RecordConverter(entry).convert(ordered_json::parse(record));
  REQUIRE(!r.conversation.has_value());
  return r.skip_category;
}

std::vector<std::pair<Role, std::string>> turns(const Conversation& c) {
  std::vector<std::pair<Role, std::string>> out;
  for (const Turn& t : c.turns) out.emplace_back(t.role, t.content);
  return out;
}

using Turns = std::vector<std::pair<Role, std::string>>;

}  // namespace

TEST_CASE("alpaca: LLaMA-Factory's default columns instruction/input/output", "[data][formats]") {
  const DatasetEntry alpaca = entry_of("alpaca");
  Conversation c = convert(alpaca, R"({"instruction": "Add.", "input": "1 and 2", "output": "3", "system": "x"})");
  CHECK(turns(c) == Turns{{Role::user, "Add.\n1 and 2"}, {Role::assistant, "3"}});
  CHECK(c.system.empty());  // system and history are read only when "columns" names them
  c = convert(alpaca, R"({"instruction": "Say hi.", "input": "", "output": ""})");
  CHECK(turns(c) == Turns{{Role::user, "Say hi."}, {Role::assistant, ""}});
  c = convert(alpaca, R"({"instruction": null, "input": "only input", "output": "ok"})");
  CHECK(turns(c) == Turns{{Role::user, "only input"}, {Role::assistant, "ok"}});
}

TEST_CASE("alpaca: columns remap prompt/query/response, history pairs and system", "[data][formats]") {
  const DatasetEntry e = entry_of("alpaca", {{"prompt", "q"}, {"response", "a"}, {"history", "h"}, {"system", "s"}});
  const Conversation c =
      convert(e, R"({"q": "And now?", "input": "unread", "a": "Yes.", "h": [["Hi", "Hello!"], ["Ready?", "Almost."]],
                     "s": "Be brief."})");
  CHECK(turns(c) == Turns{{Role::user, "Hi"},
                          {Role::assistant, "Hello!"},
                          {Role::user, "Ready?"},
                          {Role::assistant, "Almost."},
                          {Role::user, "And now?"},
                          {Role::assistant, "Yes."}});
  CHECK(c.system == "Be brief.");
  CHECK(skip_of(e, R"({"q": "No answer", "a": null})") == "no response");
  CHECK(test::error_message([&] { convert(e, R"({"q": "x", "a": "y", "h": [["only one"]]})"); }) ==
        "column \"h\"[0] must be a [prompt, response] pair of strings");
  CHECK(test::error_message([&] { convert(e, R"({"q": "x", "a": 3})"); }) ==
        "column \"a\" must be a string, got number");
}

TEST_CASE("sharegpt: default tags, system message first, function and observation turns", "[data][formats]") {
  const DatasetEntry e = entry_of("sharegpt", {{"messages", "conversations"}, {"tools", "tools"}});
  const Conversation c = convert(e, R"({"conversations": [
      {"from": "system", "value": "You use tools."},
      {"from": "human", "value": "Weather?"},
      {"from": "function_call", "value": "{\"name\": \"w\", \"arguments\": {}}"},
      {"from": "observation", "value": "sunny"},
      {"from": "gpt", "value": "Sunny."}],
    "tools": [{"name": "w", "description": "weather"}]})");
  CHECK(c.system == "You use tools.");
  CHECK(c.tools == R"([{"name": "w", "description": "weather"}])");  // a list is written back as json.dumps does
  CHECK(turns(c) == Turns{{Role::user, "Weather?"},
                          {Role::function, R"({"name": "w", "arguments": {}})"},
                          {Role::observation, "sunny"},
                          {Role::assistant, "Sunny."}});
}

TEST_CASE("sharegpt: OpenAI-style tags and a system column", "[data][formats]") {
  const DatasetEntry e = entry_of("sharegpt", {{"messages", "messages"}, {"system", "sys"}},
                                  {{"role_tag", "role"},
                                   {"content_tag", "content"},
                                   {"user_tag", "user"},
                                   {"assistant_tag", "assistant"},
                                   {"system_tag", "system"}});
  Conversation c = convert(e, R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant",
                                  "content": "A"}], "sys": "Column system."})");
  CHECK(turns(c) == Turns{{Role::user, "Q"}, {Role::assistant, "A"}});
  CHECK(c.system == "Column system.");
  c = convert(e, R"({"messages": [{"role": "system", "content": "First message wins."}, {"role": "user",
                     "content": "Q"}, {"role": "assistant", "content": null}], "sys": "unused"})");
  CHECK(c.system == "First message wins.");
  CHECK(turns(c) == Turns{{Role::user, "Q"}, {Role::assistant, ""}});
  // Tags replace all defaults: observation/function tags are unset here, so "function_call" is an unknown role.
  CHECK(skip_of(e, R"({"messages": [{"role": "user", "content": "Q"}, {"role": "function_call", "content": "{}"}]})") ==
        "unknown role");
}

TEST_CASE("sharegpt: broken conversations are skipped with their reason", "[data][formats]") {
  const DatasetEntry e = entry_of("sharegpt");
  CHECK(skip_of(e, R"({"conversations": []})") == "empty conversation");
  CHECK(skip_of(e, R"({"conversations": null})") == "empty conversation");
  CHECK(skip_of(e, R"({"conversations": [{"from": "system", "value": "S"}]})") == "empty conversation");
  CHECK(skip_of(e, R"({"conversations": [{"from": "bot", "value": "?"}, {"from": "gpt", "value": "A"}]})") ==
        "unknown role");
  CHECK(skip_of(e, R"({"conversations": [{"value": "no role"}, {"from": "gpt", "value": "A"}]})") == "unknown role");
  CHECK(skip_of(e, R"({"conversations": [{"from": "human", "value": "Q"}, {"from": "human", "value": "Q2"}]})") ==
        "roles do not alternate");
  CHECK(skip_of(e, R"({"conversations": [{"from": "gpt", "value": "A"}, {"from": "human", "value": "Q"}]})") ==
        "roles do not alternate");
  CHECK(skip_of(e, R"({"conversations": [{"from": "human", "value": "Q"}, {"from": "gpt", "value": "A"},
                   {"from": "system", "value": "late"}, {"from": "gpt", "value": "A"}]})") == "roles do not alternate");
  CHECK(skip_of(e, R"({"conversations": [{"from": "human", "value": "Q"}, {"from": "gpt", "value": "A"},
                   {"from": "human", "value": "Q2"}]})") == "no assistant turn at the end");
  CHECK(test::error_message([&] { convert(e, R"({"conversations": "text"})"); }) ==
        "column \"conversations\" must be a list of messages, got string");
  CHECK(test::error_message([&] { convert(e, R"({"conversations": [{"from": "human", "value": 7}]})"); }) ==
        "conversations[0] \"value\" must be a string, got number");
}

TEST_CASE("entries with wrong columns or tags are errors naming the entry and the key", "[data][formats]") {
  auto error = [](const DatasetEntry& e) { return test::error_message([&] { RecordConverter{e}; }); };
  CHECK(error(entry_of("alpaca", {{"messages", "conversations"}})) ==
        "dataset 'd': columns.messages is a sharegpt column but the entry's formatting is alpaca");
  CHECK(error(entry_of("sharegpt", {{"prompt", "q"}})) ==
        "dataset 'd': columns.prompt is an alpaca column but the entry's formatting is sharegpt");
  CHECK(error(entry_of("alpaca", {{"promt", "q"}})) ==
        "dataset 'd': columns.promt: unknown column; accepted: prompt, query, response, history, system, tools");
  CHECK(error(entry_of("alpaca", {{"images", "img"}})) ==
        "dataset 'd': columns.images: multimodal and KTO data are not supported");
  CHECK(error(entry_of("alpaca", {{"prompt", "q"}})) ==
        "dataset 'd': columns has no \"response\" (a columns object replaces all of LLaMA-Factory's defaults)");
  CHECK(error(entry_of("alpaca", {}, {{"role_tag", "role"}})) == "dataset 'd': tags apply to formatting sharegpt only");
  CHECK(error(entry_of("sharegpt", {}, {{"role_tag", "role"}})) ==
        "dataset 'd': tags must set content_tag (tags replace all of LLaMA-Factory's defaults)");
  CHECK(error(entry_of("sharegpt", {}, {{"rol_tag", "role"}})).find("dataset 'd': tags.rol_tag: unknown tag") == 0);
}

namespace {

// A registry with one dataset `name` of `formatting` in `file` holding `text`.
DatasetConfig write_dataset(const test::TempDir& dir, const std::string& file, const std::string& text,
                            const std::string& formatting = "alpaca", const std::string& extra = "") {
  dir.write("dataset_info.json", R"({"d": {"file_name": ")" + file + R"(", "formatting": ")" + formatting + "\"" +
                                     extra + "}}");
  dir.write(file, text);
  DatasetConfig config;
  config.name = "d";
  config.dataset_dir = dir.path().string();
  config.max_seq_len = 64;
  config.template_name = "empty";
  return config;
}

}  // namespace

TEST_CASE("load_datasets renders text datasets; malformed JSON names file:line", "[data][formats]") {
  test::TempDir dir;
  const test::ByteTokenizer tok;
  const TextOptions text{&tok, "llama"};
  DatasetConfig config = write_dataset(dir, "d.json", R"([
  {"instruction": "Hi", "input": "", "output": "Yo"},
  {"instruction": "A", "input": "B", "output": "C"}
])");
  DatasetStats stats;
  const auto examples = load_datasets(config, 300, text, &stats);
  REQUIRE(examples.size() == 2);
  CHECK(examples[0].input_ids == test::bytes("HiYo"));  // template empty: content only, no EOS
  CHECK(examples[0].labels == std::vector<int32_t>{-100, -100, 'Y', 'o'});
  CHECK(examples[1].input_ids == test::bytes("A\nBC"));
  CHECK(stats.examples == 2);
  CHECK(stats.tokens == 8);

  const std::string file = (dir.path() / "d.json").string();
  write_dataset(dir, "d.json",
                "[\n  {\"instruction\": \"x\", \"output\": \"y\"},\n  {\"instruction\": \"x\" \"output\"}\n]");
  CHECK(test::error_message([&] { load_datasets(config, 300, text, nullptr); })
            .find(file + ":3: malformed JSON: parse error at column 30: syntax error") == 0);
  config = write_dataset(dir, "d.jsonl", "{\"instruction\": \"x\", \"output\": \"y\"}\n\n{\"instruction\": \n");
  const std::string jsonl = (dir.path() / "d.jsonl").string();
  CHECK(test::error_message([&] { load_datasets(config, 300, text, nullptr); })
            .find(jsonl + ":3: malformed JSON: parse error at column") == 0);
}

TEST_CASE("load_datasets: missing column, wrong type, no tokenizer, token ids beyond the model", "[data][formats]") {
  test::TempDir dir;
  const test::ByteTokenizer tok;
  const TextOptions text{&tok, "llama"};
  const std::string file = (dir.path() / "d.jsonl").string();
  DatasetConfig config = write_dataset(dir, "d.jsonl", "{\"instruction\": \"x\", \"output\": \"y\"}\n");
  CHECK(test::error_message([&] { load_datasets(config, 300, text, nullptr); }) ==
        "dataset 'd': " + file + ": no record has the column \"input\" (columns.query, LLaMA-Factory's default); "
        "set \"columns\" in dataset_info.json");
  config = write_dataset(dir, "d.jsonl", "{\"q\": \"x\", \"a\": \"y\"}\n{\"q\": \"x\", \"a\": [1]}\n", "alpaca",
                         R"(, "columns": {"prompt": "q", "response": "a"})");
  CHECK(test::error_message([&] { load_datasets(config, 300, text, nullptr); }) ==
        "dataset 'd': " + file + ":2: column \"a\" must be a string, got array");
  config = write_dataset(dir, "d.jsonl", "{\"q\": \"x\", \"a\": \"y\"}\n", "alpaca",
                         R"(, "columns": {"prompt": "q", "response": "a"})");
  CHECK(test::error_message([&] { load_datasets(config, 300, TextOptions{}, nullptr); }) ==
        "dataset 'd': formatting alpaca is text and needs the model's tokenizer (tokenizer.json in the model "
        "directory), but there is none");
  CHECK(test::error_message([&] { load_datasets(config, 100, text, nullptr); }) ==
        "dataset 'd': " + file + ":1: token id 120 is outside the model's vocab_size 100 (the tokenizer does not "
        "belong to this model)");
  config.template_name = "chatmll";
  CHECK(test::error_message([&] { load_datasets(config, 300, text, nullptr); })
            .find("dataset.template: unknown template 'chatmll'; known: auto, jinja, baichuan2, chatml,") == 0);
}

TEST_CASE("load_datasets skips broken conversations, counts them and keeps the rest", "[data][formats]") {
  test::TempDir dir;
  const test::ByteTokenizer tok;
  DatasetConfig config = write_dataset(dir, "d.jsonl",
                                       R"({"conversations": [{"from": "human", "value": "Q"}, {"from": "gpt", "value": "A"}]}
{"conversations": []}
{"conversations": [{"from": "bot", "value": "Q"}, {"from": "gpt", "value": "A"}]}
{"conversations": [{"from": "human", "value": "Q"}, {"from": "human", "value": "A"}]}
{"conversations": [{"from": "human", "value": "Q"}]}
{"conversations": [{"from": "human", "value": "Q2"}, {"from": "gpt", "value": "A2"}]}
)",
                                       "sharegpt");
  DatasetStats stats;
  const auto examples = load_datasets(config, 300, TextOptions{&tok, "llama"}, &stats);
  REQUIRE(examples.size() == 2);
  CHECK(examples[1].input_ids == test::bytes("Q2A2"));
  CHECK(stats.examples == 2);
  CHECK(stats.skipped == 4);

  config = write_dataset(dir, "d.jsonl", "{\"conversations\": []}\n", "sharegpt");
  CHECK(test::error_message([&] { load_datasets(config, 300, TextOptions{&tok, "llama"}, nullptr); }) ==
        "dataset.name 'd': no examples to train on (0 dropped with no trained token, 1 records skipped)");
}

TEST_CASE("load_datasets mixes tokenized and text datasets and picks the template with template: auto",
          "[data][formats]") {
  test::TempDir dir;
  const test::ByteTokenizer tok;
  dir.write("dataset_info.json", R"({"ids": {"file_name": "ids.jsonl", "formatting": "tokenized"},
                                     "chat": {"file_name": "chat.json", "formatting": "sharegpt"}})");
  dir.write("ids.jsonl", "{\"input_ids\": [1, 2, 3]}\n");
  dir.write("chat.json", R"([{"conversations": [{"from": "human", "value": "Q"}, {"from": "gpt", "value": "A"}]}])");
  DatasetConfig config;
  config.name = "ids,chat";
  config.dataset_dir = dir.path().string();
  config.max_seq_len = 256;
  CHECK(needs_tokenizer(config));
  const auto examples = load_datasets(config, 300, TextOptions{&tok, "qwen2"}, nullptr);  // auto -> qwen
  REQUIRE(examples.size() == 2);
  CHECK(examples[0].input_ids == std::vector<int32_t>{1, 2, 3});
  const std::string prompt = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                             "assistant.<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n";
  CHECK(tok.decode(examples[1].input_ids) == prompt + "A<|im_end|>\n");
  CHECK(std::count(examples[1].labels.begin(), examples[1].labels.end(), kIgnoreIndex) ==
        static_cast<long>(tok.encode(prompt).size()));
  config.name = "ids";
  CHECK(!needs_tokenizer(config));
  CHECK(test::error_message([&] { load_datasets(config, 300, TextOptions{&tok, "gemma"}, nullptr); }).empty());
  config.name = "chat";
  CHECK(test::error_message([&] { load_datasets(config, 300, TextOptions{&tok, "gemma"}, nullptr); })
            .find("dataset.template: auto cannot tell the chat template of this gemma model") == 0);
}

}  // namespace mt
