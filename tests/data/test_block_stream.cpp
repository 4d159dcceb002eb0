// dataset.streaming's BlockStream: the same blocks as the in-memory pre-training path, pass after pass; a seek to a
// saved cursor continues with exactly the blocks that followed it; what it holds stays below one block and one
// document of tokens plus the batches handed out; prefetching workers get the same batches in the same order.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "catch.h"
#include "data/block_stream.h"
#include "data/byte_tokenizer.h"
#include "data/dataset.h"
#include "data/fixture.h"
#include "data/formats/pretrain_loader.h"
#include "data/prefetcher.h"
#include "data/tokenizer.h"

using namespace mt;

namespace {

struct Corpus {
  test::TempDir dir;
  std::vector<DatasetEntry> entries;
  DatasetConfig config;
  Corpus() {
    std::string txt, jsonl;
    for (int i = 0; i < 30; ++i) txt += "line " + std::to_string(i) + std::string(static_cast<size_t>(i % 7), 'x') + "\n";
    for (int i = 0; i < 10; ++i) jsonl += "{\"text\": \"doc " + std::to_string(i) + "\"}\n";
    dir.write("a.txt", txt);
    dir.write("b.jsonl", jsonl);
    dir.write("dataset_info.json", R"({"a": {"file_name": "a.txt"},
                                       "b": {"file_name": "b.jsonl", "columns": {"prompt": "text"}}})");
    const DatasetRegistry registry(dir.path());
    entries = {registry.entry("a"), registry.entry("b")};
    config.name = "a,b";
    config.dataset_dir = dir.path().string();
    config.max_seq_len = 16;
  }
  BlockStream stream(int64_t batch) const {
    return BlockStream(entries, std::make_shared<test::ByteTokenizer>(), 16, batch, 0, 300);
  }
};

std::vector<std::vector<int32_t>> rows(const Batch& b) {
  std::vector<std::vector<int32_t>> out;
  for (int64_t s = 0; s < b.num_seqs; ++s)
    out.emplace_back(b.input_ids.begin() + s * b.seq_len, b.input_ids.begin() + (s + 1) * b.seq_len);
  return out;
}

}  // namespace

TEST_CASE("a streamed corpus gives the in-memory path's blocks, pass after pass", "[data][stream]") {
  const Corpus corpus;
  const test::ByteTokenizer tok;
  const std::vector<Example> blocks = load_datasets(corpus.config, 300, TextOptions{&tok, "llama", true}, nullptr);
  REQUIRE(blocks.size() > 3);
  BlockStream stream = corpus.stream(1);
  for (int64_t pass = 0; pass < 2; ++pass)
    for (size_t k = 0; k < blocks.size(); ++k) {
      INFO("pass " << pass << " block " << k);
      const Batch b = stream.next();
      CHECK(rows(b)[0] == blocks[k].input_ids);
      CHECK(stream.buffered_tokens() < 16 + 32);  // less than a block and the longest document
      CHECK(stream.pending_blocks() == 0);
    }
}

TEST_CASE("a streamed corpus resumed at its cursor continues with the same blocks", "[data][stream]") {
  const Corpus corpus;
  BlockStream straight = corpus.stream(3);
  std::vector<DataCursor> cursors;
  std::vector<Batch> batches;
  for (int k = 0; k < 12; ++k) {  // more than one pass
    cursors.push_back(straight.cursor());
    batches.push_back(straight.next());
  }
  CHECK(cursors.back().epoch >= 1);
  for (const int at : {1, 5, 11}) {
    BlockStream resumed = corpus.stream(3);
    resumed.seek(cursors[static_cast<size_t>(at)]);
    for (int k = at; k < 12; ++k) CHECK(resumed.next().input_ids == batches[static_cast<size_t>(k)].input_ids);
  }
}

TEST_CASE("prefetching workers stream the same batches", "[data][stream]") {
  const Corpus corpus;
  BlockStream alone = corpus.stream(2);
  BlockStream shared = corpus.stream(2);
  Prefetcher prefetcher(shared, 3);
  for (int k = 0; k < 20; ++k) CHECK(prefetcher.next().input_ids == alone.next().input_ids);
  CHECK(shared.pending_blocks() <= 3 * 2);  // the batches built ahead, no more
}

TEST_CASE("streaming refuses files it cannot read line by line", "[data][stream][bad-input]") {
  test::TempDir dir;
  dir.write("c.json", "[]");
  dir.write("dataset_info.json", R"({"c": {"file_name": "c.json"}})");
  const DatasetRegistry registry(dir.path());
  CHECK(test::error_message([&] {
          BlockStream({registry.entry("c")}, std::make_shared<test::ByteTokenizer>(), 16, 1, 0, 300);
        }) == "dataset 'c': " + (dir.path() / "c.json").string() +
                  ": dataset.streaming reads .txt and .jsonl files (one document per line), not .json");
}

TEST_CASE("a streamed corpus has LLaMA-Factory's EOS and BOS rules too", "[data][stream]") {
  // The fixtures of tests/data/fixtures/pretrain/ whose corpus is one .txt file cut whole (one LLaMA-Factory batch):
  // llama3's <|end_of_text|> EOS and, with add_bos_token, the BOS over each block's first token.
  const std::string source = MEGATRAIN_SOURCE_DIR;
  for (const char* name : {"llama3_template_eos", "qwen_lines"}) {
    INFO(name);
    const nlohmann::json f =
        nlohmann::json::parse(std::ifstream(source + "/tests/data/fixtures/pretrain/" + std::string(name) + ".json"));
    const std::filesystem::path tokenizer_dir = source + "/" + f["tokenizer"].get<std::string>();
    std::shared_ptr<const Tokenizer> tokenizer = Tokenizer::from_directory(tokenizer_dir);
    const DatasetRegistry registry(source + "/tests/data/fixtures/pretrain/data");
    const PretrainTokens special = pretrain_tokens(f["template"], *tokenizer, tokenizer_dir);
    BlockStream stream({registry.entry(f["dataset"])}, tokenizer, f["cutoff_len"], 1, 0, tokenizer->vocab_size(),
                       special);
    for (const auto& block : f["blocks"]) CHECK(rows(stream.next())[0] == block.get<std::vector<int32_t>>());
  }
  // The BOS of add_bos_token opens every streamed block.
  const PretrainTokens with_bos{2, 1, "test"};
  const std::string txt = "abc def ghi\njkl mno\npqr\n";
  test::TempDir dir;
  dir.write("c.txt", txt);
  dir.write("dataset_info.json", R"({"c": {"file_name": "c.txt"}})");
  const DatasetRegistry registry(dir.path());
  BlockStream stream({registry.entry("c")}, std::make_shared<test::ByteTokenizer>(), 4, 1, 0, 300, with_bos);
  for (int k = 0; k < 3; ++k) CHECK(rows(stream.next())[0][0] == 1);
}
