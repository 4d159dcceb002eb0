// The dataset registry (dataset_info.json) and load_datasets: lookup errors, formatting dispatch,
// comma-separated concatenation, and the built-in demo dataset.
#include <algorithm>

#include "catch.h"
#include "data/dataset.h"
#include "data/dataset_registry.h"
#include "fixture.h"

namespace mt {
namespace {

const char* kRegistry = R"({
  "first": {"file_name": "first.jsonl", "formatting": "tokenized"},
  "second": {"file_name": "second.json", "formatting": "tokenized", "columns": {"input_ids": "ids"}},
  "chat": {"file_name": "chat.json", "formatting": "sharegpt",
           "columns": {"messages": "conversations"}, "tags": {"role_tag": "from", "content_tag": "value"}},
  "instruct": {"file_name": "instruct.json"},
  "hub_only": {"hf_hub_id": "someone/data"},
  "odd": {"file_name": "odd.json", "formatting": "csv"}
})";

DatasetConfig config_for(const test::TempDir& dir, const std::string& names) {
  DatasetConfig config;
  config.name = names;
  config.dataset_dir = dir.path().string();
  config.max_seq_len = 8;
  return config;
}

void write_registry(const test::TempDir& dir) {
  dir.write("dataset_info.json", kRegistry);
  dir.write("first.jsonl", "{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}\n");
  dir.write("second.json", "[{\"ids\": [20, 21], \"labels\": [-100, 21]}, {\"ids\": [22]}]");
}

}  // namespace

TEST_CASE("registry entries keep formatting, columns and tags", "[data][registry]") {
  test::TempDir dir;
  write_registry(dir);
  const DatasetRegistry registry(dir.path());
  CHECK(registry.names() == std::vector<std::string>{"chat", "first", "hub_only", "instruct", "odd", "second"});
  const DatasetEntry& chat = registry.entry("chat");
  CHECK(chat.formatting == "sharegpt");
  CHECK(chat.file == dir.path() / "chat.json");
  CHECK(chat.column("messages") == "conversations");
  CHECK(chat.column("system") == "system");
  CHECK(chat.tags.at("role_tag") == "from");
  CHECK(registry.entry("instruct").formatting == "alpaca");  // LLaMA-Factory's default
}

TEST_CASE("registry errors name the file and the entry", "[data][registry]") {
  test::TempDir dir;
  const std::string info = (dir.path() / "dataset_info.json").string();
  CHECK(test::error_message([&] { DatasetRegistry{dir.path()}; }).find(info + ": dataset registry not found") == 0);

  dir.write("dataset_info.json", "{\"a\": {\"file_name\": \"a.json\",}}");
  CHECK(test::error_message([&] { DatasetRegistry{dir.path()}; }).find(info + ": malformed JSON: parse error") == 0);

  write_registry(dir);
  const DatasetRegistry registry(dir.path());
  CHECK(test::error_message([&] { registry.entry("thrid"); }) ==
        info + ": no dataset named 'thrid'; available: chat, first, hub_only, instruct, odd, second");
  CHECK(test::error_message([&] { registry.entry("hub_only"); })
            .find(info + ": entry 'hub_only' has no file_name") == 0);
  CHECK(test::error_message([&] { registry.entry("odd"); }) ==
        info + ": entry 'odd': formatting \"csv\" is not one of alpaca, sharegpt, tokenized");
}

TEST_CASE("load_datasets concatenates comma-separated datasets in order and sums stats", "[data][load]") {
  test::TempDir dir;
  write_registry(dir);
  DatasetStats stats;
  const auto examples = load_datasets(config_for(dir, " second , first"), 512, {}, &stats);
  REQUIRE(examples.size() == 3);  // second's 1-token record is dropped
  CHECK(examples[0].input_ids == std::vector<int32_t>{20, 21});
  CHECK(examples[1].input_ids == std::vector<int32_t>{1, 2, 3});
  CHECK(examples[2].input_ids == std::vector<int32_t>{4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(stats.examples == 3);
  CHECK(stats.tokens == 13);
  CHECK(stats.truncated == 1);
  CHECK(stats.dropped == 1);
}

TEST_CASE("load_datasets errors", "[data][load]") {
  test::TempDir dir;
  write_registry(dir);
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "first,instruct"), 512, {}, nullptr); }) ==
        "dataset 'instruct': formatting alpaca is text and needs the model's tokenizer (tokenizer.json in the model "
        "directory), but there is none");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "chat"), 512, {}, nullptr); }) ==
        "dataset 'chat': formatting sharegpt is text and needs the model's tokenizer (tokenizer.json in the model "
        "directory), but there is none");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "first,,second"), 512, {}, nullptr); })
            .find("empty dataset name") != std::string::npos);
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "nope"), 512, {}, nullptr); })
            .find("no dataset named 'nope'") != std::string::npos);
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "first"), 10, {}, nullptr); })
            .find("first.jsonl:2: input_ids[6] = 10 is out of range for vocab_size 10") != std::string::npos);

  dir.write("first.jsonl", "{\"input_ids\": [1]}\n");
  dir.write("second.json", "[]");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "first,second"), 512, {}, nullptr); }) ==
        "dataset.name 'first,second': no examples to train on (1 dropped with no trained token)");
}

TEST_CASE("the built-in demo dataset loads for a vocabulary of 512", "[data][load]") {
  DatasetConfig config;
  config.name = "demo_tokenized";
  config.dataset_dir = MEGATRAIN_SOURCE_DIR "/data";
  config.max_seq_len = 128;
  DatasetStats stats;
  const auto examples = load_datasets(config, 512, {}, &stats);
  CHECK(examples.size() >= 1000);
  CHECK(stats.truncated == 0);
  CHECK(stats.dropped == 0);
  size_t shortest = 1 << 20, longest = 0;
  for (const Example& e : examples) {
    shortest = std::min(shortest, e.input_ids.size());
    longest = std::max(longest, e.input_ids.size());
  }
  CHECK(shortest >= 24);
  CHECK(longest <= 120);
}

}  // namespace mt

namespace mt {

TEST_CASE("hub entries name their download command, and num_samples and other splits are refused", "[data][registry]") {
  test::TempDir dir;
  dir.write("dataset_info.json", R"({
    "alpaca_en": {"hf_hub_url": "llamafactory/alpaca_en", "ms_hub_url": "llamafactory/alpaca_en"},
    "ms_only": {"ms_hub_url": "AI-ModelScope/some_data"},
    "sampled": {"file_name": "a.json", "num_samples": 100},
    "test_split": {"file_name": "a.json", "split": "test"},
    "train_split": {"file_name": "a.json", "split": "train"}})");
  const std::string info = (dir.path() / "dataset_info.json").string();
  const DatasetRegistry registry(dir.path());
  CHECK(test::error_message([&] { registry.entry("alpaca_en"); }) ==
        info + ": entry 'alpaca_en' is the hub dataset hf_hub_url \"llamafactory/alpaca_en\" and MegaTrain reads local "
               "files only (no network): download it with `huggingface-cli download --repo-type dataset "
               "llamafactory/alpaca_en --local-dir " + (dir.path() / "alpaca_en").string() +
               "`, then set \"file_name\" to the downloaded file");
  CHECK(test::error_message([&] { registry.entry("ms_only"); }).find("`modelscope download --dataset "
                                                                     "AI-ModelScope/some_data --local_dir ") !=
        std::string::npos);
  CHECK(test::error_message([&] { registry.entry("sampled"); }) ==
        info + ": entry 'sampled': \"num_samples\" is not supported (a local file is read whole; dataset.max_samples "
               "keeps the first N); remove it");
  CHECK(test::error_message([&] { registry.entry("test_split"); }) ==
        info + ": entry 'test_split': split \"test\" is not supported: a local file is read whole as the train split");
  CHECK(registry.entry("train_split").file == dir.path() / "a.json");
}

}  // namespace mt
