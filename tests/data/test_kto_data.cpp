// KTO's unpaired data (data/formats/kto_loader.h): alpaca and sharegpt records with a kto_tag render their completion
// exactly as the supervised path renders the record, and their KL sequence as the supervised path renders the same
// prompt with the previous record's answer (the first record takes the last: LLaMA-Factory's +1 offset), over every
// dataset's records merged in order (each dataset's first max_samples) and in blocks of kKtoShiftBlock (or
// dataset.preprocessing_batch_size); tokenized
// records carry LLaMA-Factory's processed columns; a batch holds the completions, then the KL sequences; and every
// bad-input rule is one line naming the file:line, the column or the value.
#include <fmt/format.h>

#include <algorithm>

#include "catch.h"
#include "data/dataset.h"
#include "data/formats/kto_loader.h"
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

TextOptions kto_text(const Tokenizer* tokenizer) {
  TextOptions text{tokenizer, "llama"};
  text.unpaired = true;
  return text;
}

}  // namespace

TEST_CASE("KTO records render as supervised examples, each KL sequence with the previous answer", "[data][kto]") {
  const auto tokenizer = Tokenizer::from_directory(kSource + "/configs/models/demo");
  test::TempDir dir;
  dir.write("dataset_info.json", R"({
    "kto_alpaca": {"file_name": "a.jsonl", "columns": {"prompt": "instruction", "response": "output",
                                                        "kto_tag": "label"}},
    "sft": {"file_name": "a.jsonl", "columns": {"prompt": "instruction", "response": "output"}},
    "sft_shifted": {"file_name": "shifted.jsonl", "columns": {"prompt": "instruction", "response": "output"}},
    "kto_sharegpt": {"file_name": "s.jsonl", "formatting": "sharegpt",
                     "columns": {"messages": "messages", "kto_tag": "label"},
                     "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                              "assistant_tag": "assistant"}}})");
  dir.write("a.jsonl", "{\"instruction\": \"Add 1 and 2.\", \"output\": \"3\", \"label\": true}\n"
                       "{\"instruction\": \"Name a colour.\", \"output\": \"A fish.\", \"label\": false}\n"
                       "{\"instruction\": \"Say hi.\", \"output\": \"Hi!\", \"label\": true}\n");
  dir.write("shifted.jsonl", "{\"instruction\": \"Add 1 and 2.\", \"output\": \"Hi!\"}\n"
                             "{\"instruction\": \"Name a colour.\", \"output\": \"3\"}\n"
                             "{\"instruction\": \"Say hi.\", \"output\": \"A fish.\"}\n");
  const TextOptions kto = kto_text(tokenizer.get()), sft{tokenizer.get(), "llama"};
  const int64_t V = tokenizer->vocab_size();
  DatasetStats stats;
  const std::vector<Example> examples = load_datasets(config_for(dir, "kto_alpaca"), V, kto, &stats);
  const std::vector<Example> plain = load_datasets(config_for(dir, "sft"), V, sft, nullptr);
  const std::vector<Example> shifted = load_datasets(config_for(dir, "sft_shifted"), V, sft, nullptr);
  REQUIRE(examples.size() == 3);
  CHECK(stats.examples == 3);
  for (size_t i = 0; i < 3; ++i) {
    INFO("record " << i);
    CHECK(examples[i].input_ids == plain[i].input_ids);
    CHECK(examples[i].labels == plain[i].labels);
    CHECK(examples[i].kl_ids == shifted[i].input_ids);
    CHECK(examples[i].kl_labels == shifted[i].labels);
    CHECK(examples[i].desirable == (i != 1));
  }
  // A batch: the completions at 0..N-1, the KL sequences at N..2N-1, the tags per example.
  const Batch batch = make_batch(examples);
  CHECK(batch.num_seqs == 6);
  CHECK(batch.seq_lens[0] == static_cast<int32_t>(examples[0].input_ids.size()));
  CHECK(batch.seq_lens[3] == static_cast<int32_t>(examples[0].kl_ids.size()));
  CHECK(batch.desirable == std::vector<uint8_t>{1, 0, 1});
  const Batch kl = batch_rows(batch, 3, 3);
  CHECK(kl.num_seqs == 3);
  const auto row1 = kl.input_ids.begin() + kl.seq_len;
  CHECK(std::vector<int32_t>(row1, row1 + kl.seq_lens[1]) == examples[1].kl_ids);

  dir.write("s.jsonl",
            "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": "
            "\"Hello!\"}], \"label\": false}\n"
            "{\"messages\": [{\"role\": \"user\", \"content\": \"Add.\"}, {\"role\": \"assistant\", \"content\": "
            "\"3\"}], \"label\": true}\n");
  const std::vector<Example> shared = load_datasets(config_for(dir, "kto_sharegpt"), V, kto, nullptr);
  REQUIRE(shared.size() == 2);
  CHECK_FALSE(shared[0].desirable);
  CHECK(tokenizer->decode(shared[0].input_ids) ==
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n");
  CHECK(tokenizer->decode(shared[0].kl_ids) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n3<|im_end|>\n");
  CHECK(tokenizer->decode(shared[1].kl_ids) ==
        "<|im_start|>user\nAdd.<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n");
}

TEST_CASE("the KL shift runs over every dataset's records merged, in blocks, as LLaMA-Factory's", "[data][kto]") {
  const auto tokenizer = Tokenizer::from_directory(kSource + "/configs/models/demo");
  test::TempDir dir;
  dir.write("dataset_info.json", R"({
    "a": {"file_name": "a.jsonl", "columns": {"prompt": "instruction", "response": "output", "kto_tag": "label"}},
    "b": {"file_name": "b.jsonl", "columns": {"prompt": "instruction", "response": "output", "kto_tag": "label"}},
    "kl": {"file_name": "kl.jsonl", "columns": {"prompt": "instruction", "response": "output"}}})");
  const TextOptions kto = kto_text(tokenizer.get()), sft{tokenizer.get(), "llama"};
  const int64_t V = tokenizer->vocab_size();
  // Merged records: `a` then `b`, each record's KL answer the previous merged record's, a block's first taking the
  // block's last. The expected KL sequences are rendered as SFT records of that prompt and answer.
  const auto record = [](int64_t k) {
    return fmt::format("{{\"instruction\": \"Question {}.\", \"output\": \"Answer {}.\", \"label\": {}}}\n", k, k,
                       k % 3 == 0 ? "true" : "false");
  };
  // `a` holds records 0.., `b` the next b_records; the first b_kept of b are merged (dataset.max_samples).
  const auto expect = [&](int64_t a_records, int64_t b_records, int64_t b_kept, int64_t block = kKtoShiftBlock) {
    std::string a, b, kl;
    for (int64_t k = 0; k < a_records + b_records; ++k) (k < a_records ? a : b) += record(k);
    dir.write("a.jsonl", a);
    dir.write("b.jsonl", b);
    const int64_t n = a_records + b_kept;
    for (int64_t m = 0; m < n; ++m) {
      const int64_t first = m / block * block, last = std::min(n, first + block) - 1;
      kl += fmt::format("{{\"instruction\": \"Question {}.\", \"output\": \"Answer {}.\"}}\n", m,
                        m == first ? last : m - 1);
    }
    dir.write("kl.jsonl", kl);
  };
  SECTION("a block over both datasets: a's first record takes b's last answer, b's first a's last") {
    expect(3, 2, 2);
    DatasetStats stats;
    const std::vector<Example> examples = load_datasets(config_for(dir, "a,b"), V, kto, &stats);
    const std::vector<Example> kl = load_datasets(config_for(dir, "kl"), V, sft, nullptr);
    REQUIRE(examples.size() == 5);
    CHECK(stats.examples == 5);
    for (size_t i = 0; i < examples.size(); ++i) {
      INFO("merged record " << i);
      CHECK(examples[i].kl_ids == kl[i].input_ids);
      CHECK(examples[i].kl_labels == kl[i].labels);
      CHECK(examples[i].desirable == (i % 3 == 0));
    }
  }
  SECTION("dataset.max_samples selects each dataset's records before the shift") {
    expect(2, 3, 2);  // b's third record takes no part: a's first takes b's second answer
    DatasetConfig config = config_for(dir, "a,b");
    config.max_samples = 2;
    const std::vector<Example> examples = load_datasets(config, V, kto, nullptr);
    const std::vector<Example> kl = load_datasets(config_for(dir, "kl"), V, sft, nullptr);
    REQUIRE(examples.size() == 4);
    for (size_t i = 0; i < examples.size(); ++i) {
      INFO("merged record " << i);
      CHECK(examples[i].kl_ids == kl[i].input_ids);
    }
  }
  SECTION("blocks of kKtoShiftBlock records straddle the datasets") {
    expect(600, 500, 500);  // block 0: a's 600 and b's first 400; block 1: b's last 100
    const std::vector<Example> examples = load_datasets(config_for(dir, "a,b"), V, kto, nullptr);
    const std::vector<Example> kl = load_datasets(config_for(dir, "kl"), V, sft, nullptr);
    REQUIRE(examples.size() == 1100);
    for (const size_t i : {size_t{0}, size_t{1}, size_t{599}, size_t{600}, size_t{999}, size_t{1000}, size_t{1099}}) {
      INFO("merged record " << i);
      CHECK(examples[i].kl_ids == kl[i].input_ids);
    }
  }
  SECTION("dataset.preprocessing_batch_size sets the blocks, as LLaMA-Factory's batches") {
    expect(600, 500, 500, 400);  // blocks of 400: 0-399 in a, 400-799 over both, 800-1099 in b
    DatasetConfig config = config_for(dir, "a,b");
    config.preprocessing_batch_size = 400;
    const std::vector<Example> examples = load_datasets(config, V, kto, nullptr);
    const std::vector<Example> kl = load_datasets(config_for(dir, "kl"), V, sft, nullptr);
    REQUIRE(examples.size() == 1100);
    for (const size_t i : {size_t{0}, size_t{399}, size_t{400}, size_t{600}, size_t{799}, size_t{800}, size_t{1099}}) {
      INFO("merged record " << i);
      CHECK(examples[i].kl_ids == kl[i].input_ids);
    }
  }
}

TEST_CASE("tokenized KTO records carry LLaMA-Factory's processed columns", "[data][kto]") {
  test::TempDir dir;
  dir.write("dataset_info.json",
            R"({"t": {"file_name": "t.jsonl", "formatting": "tokenized", "columns": {"kto_tag": "kto_tags"}}})");
  dir.write("t.jsonl", "{\"input_ids\": [1, 2, 3, 4], \"labels\": [-100, -100, 3, 4], \"kl_input_ids\": [1, 2, 5], "
                       "\"kl_labels\": [-100, -100, 5], \"kto_tags\": false}\n");
  TextOptions text;
  text.unpaired = true;
  const std::vector<Example> examples = load_datasets(config_for(dir, "t"), 10, text, nullptr);
  REQUIRE(examples.size() == 1);
  CHECK(examples[0].kl_ids == std::vector<int32_t>{1, 2, 5});
  CHECK(examples[0].labels == std::vector<int32_t>{-100, -100, 3, 4});
  CHECK_FALSE(examples[0].desirable);
  dir.write("t.jsonl", "{\"input_ids\": [1, 2], \"labels\": [-100, 2], \"kl_input_ids\": [1, 12], "
                       "\"kl_labels\": [-100, 2], \"kto_tags\": true}\n");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "t"), 10, text, nullptr); }) ==
        "dataset 't': " + (dir.path() / "t.jsonl").string() +
            ":1: kl_input_ids[1] = 12 is not a token id below vocab_size 10");
}

TEST_CASE("bad KTO input is refused in one line naming the place and the value", "[data][kto]") {
  const auto tokenizer = Tokenizer::from_directory(kSource + "/configs/models/demo");
  test::TempDir dir;
  dir.write("dataset_info.json", R"({
    "kto": {"file_name": "a.jsonl", "columns": {"prompt": "instruction", "response": "output", "kto_tag": "label"}},
    "plain": {"file_name": "a.jsonl", "columns": {"prompt": "instruction", "response": "output"}},
    "pairs": {"file_name": "a.jsonl", "ranking": true,
              "columns": {"prompt": "instruction", "chosen": "output", "rejected": "other"}}})");
  const std::string file = (dir.path() / "a.jsonl").string(), info = (dir.path() / "dataset_info.json").string();
  const TextOptions kto = kto_text(tokenizer.get()), sft{tokenizer.get(), "llama"};
  const TextOptions dpo{tokenizer.get(), "llama", false, {}, true};
  const int64_t V = tokenizer->vocab_size();
  dir.write("a.jsonl", "{\"instruction\": \"Q\", \"output\": \"A\", \"label\": true}\n"
                       "{\"instruction\": \"Q\", \"output\": \"B\", \"label\": \"yes\"}\n");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "kto"), V, kto, nullptr); }) ==
        "dataset 'kto': " + file + ":2: column \"label\" (kto_tag) must be true or false, got \"yes\"");
  dir.write("a.jsonl", "{\"instruction\": \"Q\", \"output\": \"A\"}\n");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "kto"), V, kto, nullptr); }) ==
        "dataset 'kto': " + file + ":1: column \"label\" (kto_tag) must be true or false, got nothing");
  dir.write("a.jsonl", "{\"instruction\": \"Q\", \"output\": \"\", \"label\": false}\n");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "kto"), V, kto, nullptr); }) ==
        "dataset 'kto': " + file + ":1: the answer is empty");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "kto"), V, dpo, nullptr); }) ==
        info + ": dataset 'kto': columns.kto_tag is KTO's unpaired data, which training.stage kto trains (not dpo)");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "kto"), V, sft, nullptr); }) ==
        info + ": dataset 'kto': columns.kto_tag is KTO's unpaired data, which training.stage kto trains (not sft or "
               "pt)");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "pairs"), V, kto, nullptr); }) ==
        info + ": dataset 'pairs': ranking: true is preference pairs, which training.stage dpo trains (not kto)");
  CHECK(test::error_message([&] { load_datasets(config_for(dir, "plain"), V, kto, nullptr); }) ==
        info + ": dataset 'plain': training.stage kto trains on examples tagged desirable or not; this entry names "
               "no columns.kto_tag");
}

}  // namespace mt
