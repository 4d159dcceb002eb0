// Preference pairs (data/formats/pairwise_loader.h): LLaMA-Factory's pair truncation, alpaca and sharegpt pairs
// rendered exactly as the supervised path renders the same prompt with each response, tokenized pairs, the batch's
// chosen/rejected layout, and every bad-input rule (one line naming the file:line, the column or the value).
#include "catch.h"
#include "data/dataset.h"
#include "data/formats/pairwise_loader.h"
#include "data/tokenizer.h"
#include "fixture.h"

namespace mt {
namespace {

const std::string kSource = MEGATRAIN_SOURCE_DIR;

DatasetConfig config_for(const test::TempDir& dir, const std::string& name) {
  DatasetConfig config;
  config.name = name;
  config.dataset_dir = dir.path().string();
  config.max_seq_len = 256;
  config.template_name = "chatml";
  return config;
}

}  // namespace

TEST_CASE("pairs are cut as LLaMA-Factory's PairwiseDatasetProcessor cuts them", "[data][pairwise]") {
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, chosen = {21, 22, 23},
                             rejected = {31, 32, 33, 34, 35, 36, 37, 38};
  bool truncated = false;
  // infer_seqlen(10, max(3, 8) = 8, 12): target int(12·8/18) = 5, source 12 − 5 = 7.
  Example e = assemble_pair(prompt, chosen, rejected, 12, &truncated);
  CHECK(truncated);
  CHECK(e.input_ids == std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 21, 22, 23});
  CHECK(e.labels == std::vector<int32_t>{-100, -100, -100, -100, -100, -100, -100, 21, 22, 23});
  CHECK(e.rejected_ids == std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 31, 32, 33, 34, 35});
  CHECK(e.rejected_labels == std::vector<int32_t>{-100, -100, -100, -100, -100, -100, -100, 31, 32, 33, 34, 35});
  e = assemble_pair(prompt, chosen, rejected, 64, &truncated);
  CHECK_FALSE(truncated);
  CHECK(e.rejected_ids.size() == 18);
}

TEST_CASE("alpaca and sharegpt pairs render as the supervised examples of each response", "[data][pairwise]") {
  const auto tokenizer = Tokenizer::from_directory(kSource + "/configs/models/demo");
  test::TempDir dir;
  dir.write("dataset_info.json", R"({
    "pairs_alpaca": {"file_name": "a.json", "ranking": true,
                     "columns": {"prompt": "instruction", "query": "input", "chosen": "chosen", "rejected": "rejected",
                                 "system": "system", "history": "history"}},
    "pairs_sharegpt": {"file_name": "s.json", "formatting": "sharegpt", "ranking": true,
                       "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected"}},
    "sft_chosen": {"file_name": "a.json", "columns": {"prompt": "instruction", "query": "input", "response": "chosen",
                                                       "system": "system", "history": "history"}},
    "sft_rejected": {"file_name": "a.json", "columns": {"prompt": "instruction", "query": "input",
                                                         "response": "rejected", "system": "system",
                                                         "history": "history"}}})");
  dir.write("a.json", R"([
    {"instruction": "Add.", "input": "1 and 2", "chosen": "3", "rejected": "12", "system": "Be exact.",
     "history": [["Hi", "Hello!"]]},
    {"instruction": "Name a colour.", "chosen": "Blue.", "rejected": "A colour."}])");
  dir.write("s.json", R"([
    {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello!"},
                       {"from": "human", "value": "Add.\n1 and 2"}],
     "system": "unread", "chosen": {"from": "gpt", "value": "3"}, "rejected": {"from": "gpt", "value": "12"}}])");
  const TextOptions text{tokenizer.get(), "llama", false, {}, true};
  const TextOptions sft{tokenizer.get(), "llama"};
  DatasetStats stats;
  const std::vector<Example> pairs = load_datasets(config_for(dir, "pairs_alpaca"), tokenizer->vocab_size(), text,
                                                   &stats);
  const std::vector<Example> chosen = load_datasets(config_for(dir, "sft_chosen"), tokenizer->vocab_size(), sft,
                                                    nullptr);
  const std::vector<Example> rejected = load_datasets(config_for(dir, "sft_rejected"), tokenizer->vocab_size(), sft,
                                                      nullptr);
  REQUIRE(pairs.size() == 2);
  CHECK(stats.examples == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(pairs[i].input_ids == chosen[i].input_ids);
    CHECK(pairs[i].rejected_ids == rejected[i].input_ids);
    // Labels only on the last response: the history's answer is part of the prompt.
    size_t prompt = 0;
    while (pairs[i].labels[prompt] == kIgnoreIndex) ++prompt;
    CHECK(tokenizer->decode(std::vector<int32_t>(pairs[i].input_ids.begin() + static_cast<std::ptrdiff_t>(prompt),
                                                 pairs[i].input_ids.end()))
              .starts_with(i == 0 ? "3" : "Blue."));
  }
  // sharegpt: the same conversation without its system gives the first pair's tokens less the system block.
  const std::vector<Example> shared = load_datasets(config_for(dir, "pairs_sharegpt"), tokenizer->vocab_size(), text,
                                                    nullptr);
  REQUIRE(shared.size() == 1);
  const std::string text_chosen = tokenizer->decode(shared[0].input_ids);
  CHECK(text_chosen.starts_with("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"));
  CHECK(text_chosen.ends_with("<|im_start|>assistant\n3<|im_end|>\n"));
  CHECK(tokenizer->decode(shared[0].rejected_ids).ends_with("<|im_start|>assistant\n12<|im_end|>\n"));
  // A batch of pairs: chosen at 2i, rejected at 2i + 1.
  const Batch batch = make_batch(pairs);
  CHECK(batch.num_seqs == 4);
  CHECK(batch.seq_lens[1] == static_cast<int32_t>(pairs[0].rejected_ids.size()));
  CHECK(batch.reference_logps.empty());
}

TEST_CASE("tokenized pairs carry LLaMA-Factory's processed columns", "[data][pairwise]") {
  test::TempDir dir;
  dir.write("dataset_info.json", R"({"t": {"file_name": "t.jsonl", "formatting": "tokenized", "ranking": true}})");
  dir.write("t.jsonl",
            "{\"chosen_input_ids\": [1, 2, 3, 4], \"chosen_labels\": [-100, -100, 3, 4], "
            "\"rejected_input_ids\": [1, 2, 5], \"rejected_labels\": [-100, -100, 5]}\n");
  TextOptions text;
  text.pairwise = true;
  const std::vector<Example> pairs = load_datasets(config_for(dir, "t"), 10, text, nullptr);
  REQUIRE(pairs.size() == 1);
  CHECK(pairs[0].rejected_ids == std::vector<int32_t>{1, 2, 5});
  dir.write("t.jsonl",
            "{\"chosen_input_ids\": [1, 2, 3], \"chosen_labels\": [-100, 2, 3], "
            "\"rejected_input_ids\": [1, 2, 3], \"rejected_labels\": [-100, 2, 3]}\n");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "t"), 10, text, nullptr); }) ==
        "dataset 't': " + (dir.path() / "t.jsonl").string() + ":1: chosen and rejected are the same sequence");
  dir.write("t.jsonl", "{\"chosen_input_ids\": [1, 12], \"chosen_labels\": [1, 2], \"rejected_input_ids\": [1], "
                       "\"rejected_labels\": [1]}\n");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "t"), 10, text, nullptr); }) ==
        "dataset 't': " + (dir.path() / "t.jsonl").string() +
            ":1: chosen_input_ids[1] = 12 is not a token id below vocab_size 10");
}

TEST_CASE("bad preference input is refused in one line naming the place and the value", "[data][pairwise]") {
  const auto tokenizer = Tokenizer::from_directory(kSource + "/configs/models/demo");
  test::TempDir dir;
  dir.write("dataset_info.json", R"({
    "pairs": {"file_name": "a.json", "ranking": true,
              "columns": {"prompt": "instruction", "chosen": "chosen", "rejected": "rejected"}},
    "no_columns": {"file_name": "a.json", "ranking": true},
    "plain": {"file_name": "a.json", "columns": {"prompt": "instruction", "response": "chosen"}},
    "bad_flag": {"file_name": "a.json", "ranking": "yes"}})");
  const std::string file = (dir.path() / "a.json").string(), info = (dir.path() / "dataset_info.json").string();
  const TextOptions dpo{tokenizer.get(), "llama", false, {}, true};
  const TextOptions sft{tokenizer.get(), "llama"};
  const int64_t V = tokenizer->vocab_size();
  dir.write("a.json", R"([{"instruction": "Q", "chosen": "A", "rejected": ""}])");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "pairs"), V, dpo, nullptr); }) ==
        "dataset 'pairs': " + file + ":1: the rejected response is empty");
  dir.write("a.json", "[{\"instruction\": \"Q\", \"chosen\": \"A\", \"rejected\": \"B\"},\n"
                      " {\"instruction\": \"Q\", \"chosen\": \"Same\", \"rejected\": \"Same\"}]");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "pairs"), V, dpo, nullptr); }) ==
        "dataset 'pairs': " + file + ":2: chosen and rejected are the same response 'Same'");
  dir.write("a.json", R"([{"instruction": "Q", "chosen": "A", "rejected": 3}])");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "pairs"), V, dpo, nullptr); }) ==
        "dataset 'pairs': " + file + ":1: column \"rejected\" must be a string, got number");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "no_columns"), V, dpo, nullptr); }) ==
        "dataset 'no_columns': ranking: true needs columns.chosen (the chosen response) in dataset_info.json");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "pairs"), V, sft, nullptr); }) ==
        info + ": dataset 'pairs': ranking: true is preference pairs, which training.stage dpo trains (not sft or pt)");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "plain"), V, dpo, nullptr); }) ==
        info + ": dataset 'plain': training.stage dpo trains on preference pairs; this entry has no \"ranking\": true");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "bad_flag"), V, dpo, nullptr); }) ==
        info + ": entry 'bad_flag': ranking \"yes\" is not true or false");
}

}  // namespace mt
