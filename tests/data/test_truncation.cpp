// Truncation to max_seq_len: LLaMA-Factory's infer_seqlen split, the whole-turn rule, label masks, and the counts
// load_datasets reports (examples, tokens, truncated, dropped).
#include "byte_tokenizer.h"
#include "catch.h"
#include "data/dataset.h"
#include "data/formats/truncation.h"
#include "fixture.h"

namespace mt {
namespace {

std::vector<int32_t> run(int32_t first, int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(first + i);
  return ids;
}

std::vector<int32_t> masked(int n) { return std::vector<int32_t>(static_cast<size_t>(n), kIgnoreIndex); }

std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace

TEST_CASE("infer_seqlen matches LLaMA-Factory's split", "[data][truncation]") {
  // Values from llamafactory.data.processor.processor_utils.infer_seqlen.
  CHECK(infer_seqlen(10, 4, 12) == std::pair<int64_t, int64_t>{8, 4});    // short target: cut the source
  CHECK(infer_seqlen(4, 10, 12) == std::pair<int64_t, int64_t>{4, 8});    // short source: cut the target
  CHECK(infer_seqlen(10, 10, 12) == std::pair<int64_t, int64_t>{6, 6});   // both long: proportional
  CHECK(infer_seqlen(30, 10, 16) == std::pair<int64_t, int64_t>{12, 4});
  CHECK(infer_seqlen(3, 2, 12) == std::pair<int64_t, int64_t>{3, 2});     // fits
  CHECK(infer_seqlen(7, 9, 1) == std::pair<int64_t, int64_t>{1, 0});
}

TEST_CASE("assemble_example keeps whole turn pairs and cuts only the first pair", "[data][truncation]") {
  const std::vector<EncodedPair> pairs = {{run(10, 3), run(20, 2)}, {run(30, 2), run(40, 3)}, {run(50, 1), run(60, 1)}};
  bool truncated = true;
  Example e = assemble_example(pairs, 100, false, &truncated);
  CHECK(!truncated);
  CHECK(e.input_ids == cat({run(10, 3), run(20, 2), run(30, 2), run(40, 3), run(50, 1), run(60, 1)}));
  CHECK(e.labels == cat({masked(3), run(20, 2), masked(2), run(40, 3), masked(1), run(60, 1)}));

  e = assemble_example(pairs, 100, true, &truncated);  // train_on_prompt
  CHECK(e.labels == e.input_ids);

  e = assemble_example(pairs, 7, false, &truncated);  // pair 2 would still fit, but follows the dropped pair 1
  CHECK(truncated);
  CHECK(e.input_ids == cat({run(10, 3), run(20, 2)}));
  e = assemble_example(pairs, 10, false, &truncated);  // exactly the first two pairs
  CHECK(truncated);
  CHECK(e.input_ids == cat({run(10, 3), run(20, 2), run(30, 2), run(40, 3)}));
  e = assemble_example(pairs, 4, false, &truncated);  // the first pair cut by infer_seqlen(3, 2, 4) = (3, 1)
  CHECK(truncated);
  CHECK(e.input_ids == cat({run(10, 3), run(20, 1)}));
  CHECK(e.labels == cat({masked(3), run(20, 1)}));
}

TEST_CASE("load_datasets counts truncated and dropped text examples", "[data][truncation]") {
  test::TempDir dir;
  const test::ByteTokenizer tok;
  dir.write("dataset_info.json", R"({"d": {"file_name": "d.jsonl", "formatting": "sharegpt"}})");
  dir.write("d.jsonl", R"({"conversations": [{"from": "human", "value": "ab"}, {"from": "gpt", "value": "cd"}]}
{"conversations": [{"from": "human", "value": "ab"}, {"from": "gpt", "value": "cd"}, {"from": "human", "value": "e"}, {"from": "gpt", "value": "f"}]}
{"conversations": [{"from": "human", "value": "abcdefghijklmnop"}, {"from": "gpt", "value": "q"}]}
{"conversations": [{"from": "human", "value": "abcd"}, {"from": "gpt", "value": "efgh"}]}
)");
  DatasetConfig config;
  config.name = "d";
  config.dataset_dir = dir.path().string();
  config.max_seq_len = 5;
  config.template_name = "empty";
  DatasetStats stats;
  const auto examples = load_datasets(config, 300, TextOptions{&tok, "llama"}, &stats);
  // 1: fits. 2: second pair dropped. 3: infer_seqlen(16, 1, 5) = (4, 1): "abcd" + "q". 4: (3, 2): "abc" + "ef".
  REQUIRE(examples.size() == 4);
  CHECK(examples[1].input_ids == test::bytes("abcd"));
  CHECK(examples[2].input_ids == test::bytes("abcdq"));
  CHECK(examples[3].input_ids == test::bytes("abcef"));
  CHECK(stats.examples == 4);
  CHECK(stats.tokens == 18);
  CHECK(stats.truncated == 3);
  CHECK(stats.dropped == 0);

  config.max_seq_len = 1;  // nothing trained survives the shift
  stats = {};
  CHECK(test::error_message([&] { load_datasets(config, 300, TextOptions{&tok, "llama"}, &stats); }) ==
        "dataset.name 'd': no examples to train on (4 dropped with no trained token)");
}

}  // namespace mt
