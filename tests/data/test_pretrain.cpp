// Continued pre-training data (training.stage pt): documents with their EOS laid end to end and cut into blocks that
// cover every token exactly once; .txt, .csv and .jsonl files; a record without the text column is named; the
// held-out split is deterministic and disjoint.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "catch.h"
#include "data/byte_tokenizer.h"
#include "data/dataset.h"
#include "data/eval_split.h"
#include "data/fixture.h"
#include "data/formats/pretrain_loader.h"
#include "data/formats/record_files.h"
#include "data/tokenizer.h"

using namespace mt;

namespace {

DatasetConfig pt_config(const test::TempDir& dir, const std::string& info, int64_t block) {
  dir.write("dataset_info.json", info);
  DatasetConfig c;
  c.dataset_dir = dir.path().string();
  c.max_seq_len = block;
  return c;
}

}  // namespace

TEST_CASE("pt blocks cover every token of the concatenated documents exactly once", "[data][pretrain]") {
  std::vector<int32_t> stream(103);
  std::iota(stream.begin(), stream.end(), 0);
  int64_t dropped = -1;
  const std::vector<Example> blocks = cut_blocks(stream, {103}, 0, 10, std::nullopt, &dropped);
  REQUIRE(blocks.size() == 10);
  CHECK(dropped == 3);
  std::vector<int32_t> joined;
  for (const Example& b : blocks) {
    CHECK(b.input_ids.size() == 10);
    CHECK(b.labels == b.input_ids);  // every token trained
    CHECK(b.pieces.empty());          // one stream, as LLaMA-Factory's pre-training blocks
    joined.insert(joined.end(), b.input_ids.begin(), b.input_ids.end());
  }
  CHECK(joined == std::vector<int32_t>(stream.begin(), stream.begin() + 100));
}

TEST_CASE("pt documents from .txt, .csv and .jsonl end with EOS and run across datasets", "[data][pretrain]") {
  test::TempDir dir;
  dir.write("lines.txt", "ab\ncd\r\n\nef");
  dir.write("rows.csv", "id,body\n1,\"g,h\"\n2,\"say \"\"i\"\"\"\n");
  dir.write("docs.jsonl", "{\"content\": \"jk\"}\n");
  DatasetConfig c = pt_config(dir, R"({
    "txt": {"file_name": "lines.txt"},
    "csv": {"file_name": "rows.csv", "columns": {"prompt": "body"}},
    "json": {"file_name": "docs.jsonl", "columns": {"prompt": "content"}}})", 4);
  c.name = "txt,csv,json";
  const test::ByteTokenizer tok;
  DatasetStats stats;
  const auto blocks = load_datasets(c, tok.vocab_size(), TextOptions{&tok, "llama", true}, &stats);
  const int32_t eos = 257;
  std::vector<int32_t> want;
  for (const std::string doc : {"ab", "cd", "", "ef", "g,h", "say \"i\"", "jk"}) {
    const auto ids = test::bytes(doc);
    want.insert(want.end(), ids.begin(), ids.end());
    want.push_back(eos);
  }
  std::vector<int32_t> joined;
  for (const Example& b : blocks) joined.insert(joined.end(), b.input_ids.begin(), b.input_ids.end());
  CHECK(stats.documents == 7);
  CHECK(stats.dropped_tokens == static_cast<int64_t>(want.size() % 4));
  CHECK(joined == std::vector<int32_t>(want.begin(), want.end() - static_cast<std::ptrdiff_t>(want.size() % 4)));

  c.max_samples = 1;  // the first document of each dataset
  load_datasets(c, tok.vocab_size(), TextOptions{&tok, "llama", true}, &stats);
  CHECK(stats.documents == 3);
}

TEST_CASE("dataset.sample_by reads a .txt file's paragraphs, or the whole file, as its documents", "[data][pretrain]") {
  test::TempDir dir;
  const std::string text = "ab\ncd\n\nef\n\n\ngh\n";
  dir.write("book.txt", text);
  DatasetConfig c = pt_config(dir, R"({"book": {"file_name": "book.txt"}})", 4);
  c.name = "book";
  const test::ByteTokenizer tok;
  const int32_t eos = 257;
  // Hugging Face's text builder: paragraphs split at every "\n\n", each as it stands; a document is the file.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"line", {"ab", "cd", "", "ef", "", "", "gh"}},
      {"paragraph", {"ab\ncd", "ef", "\ngh\n"}},
      {"document", {text}}};
  for (const auto& [mode, docs] : cases) {
    INFO(mode);
    c.sample_by = mode;
    DatasetStats stats;
    c.max_seq_len = 2;
    const auto blocks = load_datasets(c, tok.vocab_size(), TextOptions{&tok, "llama", true}, &stats);
    std::vector<int32_t> want;
    for (const std::string& doc : docs) {
      const auto ids = test::bytes(doc);
      want.insert(want.end(), ids.begin(), ids.end());
      want.push_back(eos);
    }
    std::vector<int32_t> joined;
    for (const Example& b : blocks) joined.insert(joined.end(), b.input_ids.begin(), b.input_ids.end());
    CHECK(stats.documents == static_cast<int64_t>(docs.size()));
    CHECK(joined == std::vector<int32_t>(want.begin(), want.end() - static_cast<std::ptrdiff_t>(want.size() % 2)));
  }
}

TEST_CASE("a pt record without the text column is named with its line", "[data][pretrain][bad-input]") {
  test::TempDir dir;
  dir.write("docs.jsonl", "{\"text\": \"abcdef\"}\n{\"body\": \"x\"}\n");
  DatasetConfig c = pt_config(dir, R"({"d": {"file_name": "docs.jsonl", "columns": {"prompt": "text"}}})", 2);
  c.name = "d";
  const test::ByteTokenizer tok;
  CHECK(test::error_message([&] { load_datasets(c, tok.vocab_size(), TextOptions{&tok, "llama", true}, nullptr); }) ==
        "dataset 'd': " + (dir.path() / "docs.jsonl").string() +
            ":2: the record has no text column \"text\" (columns.prompt)");
  dir.write("bad.csv", "a,b\n1\n");
  CHECK(test::error_message([&] { read_records(dir.path() / "bad.csv", "d"); }) ==
        "dataset 'd': " + (dir.path() / "bad.csv").string() + ":2: 1 fields, but the header names 2 columns");
}

TEST_CASE("val_size holds out a seeded, disjoint set, and too large a set is refused", "[data][eval]") {
  std::vector<Example> examples;
  for (int32_t i = 0; i < 20; ++i) examples.push_back({{i, i}, {i, i}});
  const EvalSplit a = split_eval(examples, 0.1, 7, "cfg.yaml");
  const EvalSplit b = split_eval(examples, 0.1, 7, "cfg.yaml");
  REQUIRE(a.eval.size() == 2);
  CHECK(a.train.size() == 18);
  CHECK(a.eval[0].input_ids == b.eval[0].input_ids);
  std::vector<int32_t> seen;
  for (const auto* part : {&a.train, &a.eval})
    for (const Example& e : *part) seen.push_back(e.input_ids[0]);
  std::sort(seen.begin(), seen.end());
  std::vector<int32_t> all(20);
  std::iota(all.begin(), all.end(), 0);
  CHECK(seen == all);
  CHECK(split_eval(examples, 5.0, 7, "cfg.yaml").eval.size() == 5);
  CHECK(eval_count(0.25, 10) == 3);  // rounds up, as train_test_split does
  CHECK(test::error_message([&] { split_eval(examples, 20.0, 7, "cfg.yaml"); }) ==
        "cfg.yaml: dataset.val_size: 20.0 holds out 20 of the 20 examples of dataset.name, leaving none to train on");
}

TEST_CASE("pt blocks equal LLaMA-Factory's own, token for token", "[data][pretrain]") {
  // tests/data/fixtures/pretrain/<case>.json (tools/make_pretrain_fixtures.py): LLaMA-Factory 0.9.5's get_dataset,
  // stage pt, over tests/data/fixtures/pretrain/data/ with the tokenizer fixtures: its EOS rules (tokenizer, a
  // template's replaced EOS, llama3's <|end_of_text|>), the BOS of add_bos_token tokenizers, and the per-batch cut.
  const std::string source = MEGATRAIN_SOURCE_DIR;
  for (const char* name : {"qwen_lines", "qwen_batches", "phi_template_eos", "llama3_template_eos", "llama2_bos"}) {
    INFO(name);
    std::ifstream in(source + "/tests/data/fixtures/pretrain/" + name + ".json");
    REQUIRE(in.good());
    const nlohmann::json f = nlohmann::json::parse(in);
    // The tokenizer as the fixture script loaded it: add_bos_token as tokenizer_config.json would set it.
    test::TempDir tokenizer_dir;
    const std::filesystem::path from = source + "/" + f["tokenizer"].get<std::string>();
    std::filesystem::copy_file(from / "tokenizer.json", tokenizer_dir.path() / "tokenizer.json");
    nlohmann::json config = nlohmann::json::parse(std::ifstream(from / "tokenizer_config.json"));
    if (f["add_bos_token"].get<bool>()) config["add_bos_token"] = true;
    tokenizer_dir.write("tokenizer_config.json", config.dump());
    const auto tokenizer = Tokenizer::from_directory(tokenizer_dir.path());

    DatasetConfig c;
    c.dataset_dir = source + "/tests/data/fixtures/pretrain/data";
    c.name = f["dataset"];
    c.max_seq_len = f["cutoff_len"];
    c.template_name = f["template"];
    c.preprocessing_batch_size = f["preprocessing_batch_size"];
    DatasetStats stats;
    const auto blocks = load_datasets(c, tokenizer->vocab_size(),
                                      TextOptions{tokenizer.get(), "llama", true, tokenizer_dir.path()}, &stats);
    REQUIRE(blocks.size() == f["blocks"].size());
    for (size_t i = 0; i < blocks.size(); ++i) {
      CHECK(blocks[i].input_ids == f["blocks"][i].get<std::vector<int32_t>>());
      CHECK(blocks[i].labels == blocks[i].input_ids);
    }
    // Under 1000 documents one LLaMA-Factory batch is the whole corpus: our default (0) cuts the same blocks.
    if (f["preprocessing_batch_size"] == 1000) {
      c.preprocessing_batch_size = 0;
      CHECK(load_datasets(c, tokenizer->vocab_size(),
                          TextOptions{tokenizer.get(), "llama", true, tokenizer_dir.path()}, nullptr).size() ==
            blocks.size());
    }
  }
}

TEST_CASE("pt with preprocessing_batch_size cuts each batch of documents on its own", "[data][pretrain]") {
  std::vector<int32_t> stream(30);
  std::iota(stream.begin(), stream.end(), 0);
  int64_t dropped = -1;
  // Documents end at 7, 12, 25, 30; batches of 2: [0, 12) gives one block of 5 (2 left), [12, 30) three (3 left).
  const std::vector<Example> blocks = cut_blocks(stream, {7, 12, 25, 30}, 2, 5, 99, &dropped);
  REQUIRE(blocks.size() == 5);
  CHECK(dropped == 2 + 3);
  CHECK(blocks[0].input_ids == std::vector<int32_t>{99, 1, 2, 3, 4});
  CHECK(blocks[2].input_ids == std::vector<int32_t>{99, 13, 14, 15, 16});
  CHECK(blocks[4].input_ids == std::vector<int32_t>{99, 23, 24, 25, 26});
}
