// load_tokenized: .jsonl and .json array files, optional and -100 labels, renamed columns,
// truncation and dropping, and the file:line errors for bad records.
#include "catch.h"
#include "data/tokenized_loader.h"
#include "fixture.h"

namespace mt {
namespace {

constexpr int64_t kVocab = 512;

DatasetEntry tokenized_entry(const std::filesystem::path& file) {
  return DatasetEntry{
      .name = std::string("t"), .file = file, .formatting = std::string("tokenized"), .columns = {}, .tags = {}};
}

std::vector<Example> load(const std::filesystem::path& file, int64_t max_seq_len = 1024,
                          DatasetStats* stats = nullptr) {
  return load_tokenized(tokenized_entry(file), kVocab, max_seq_len, stats);
}

}  // namespace

TEST_CASE("tokenized .jsonl: records in file order, labels optional, -100 kept", "[data][tokenized]") {
  test::TempDir dir;
  const auto file = dir.write("a.jsonl",
                              "{\"input_ids\": [1, 5, 6, 2], \"labels\": [-100, -100, 6, 2]}\n"
                              "\n"
                              "{\"input_ids\": [1, 7, 8]}\r\n"
                              "   \n"
                              "{\"input_ids\": [1, 9], \"labels\": null}");
  DatasetStats stats;
  const auto examples = load(file, 1024, &stats);
  REQUIRE(examples.size() == 3);
  CHECK(examples[0].input_ids == std::vector<int32_t>{1, 5, 6, 2});
  CHECK(examples[0].labels == std::vector<int32_t>{kIgnoreIndex, kIgnoreIndex, 6, 2});
  CHECK(examples[1].input_ids == std::vector<int32_t>{1, 7, 8});
  CHECK(examples[1].labels == examples[1].input_ids);
  CHECK(examples[2].labels == std::vector<int32_t>{1, 9});
  CHECK(stats.examples == 3);
  CHECK(stats.tokens == 9);
  CHECK(stats.truncated == 0);
  CHECK(stats.dropped == 0);
}

TEST_CASE("tokenized .json array and one-record-per-line .json", "[data][tokenized]") {
  test::TempDir dir;
  const auto array =
      dir.write("a.json", "[\n {\"input_ids\": [3, 4, 5]},\n {\"input_ids\": [6, 7], \"labels\": [-100, 7]}\n]\n");
  const auto examples = load(array);
  REQUIRE(examples.size() == 2);
  CHECK(examples[0].labels == std::vector<int32_t>{3, 4, 5});
  CHECK(examples[1].labels == std::vector<int32_t>{kIgnoreIndex, 7});

  const auto lines = dir.write("b.json", "{\"input_ids\": [3, 4]}\n{\"input_ids\": [5, 6]}\n");
  CHECK(load(lines).size() == 2);
}

TEST_CASE("tokenized columns rename input_ids and labels", "[data][tokenized]") {
  test::TempDir dir;
  DatasetEntry entry = tokenized_entry(dir.write("a.jsonl", "{\"ids\": [1, 2, 3], \"mask\": [-100, -100, 3]}\n"));
  entry.columns = {{"input_ids", "ids"}, {"labels", "mask"}};
  const auto examples = load_tokenized(entry, kVocab, 16, nullptr);
  REQUIRE(examples.size() == 1);
  CHECK(examples[0].labels == std::vector<int32_t>{kIgnoreIndex, kIgnoreIndex, 3});
}

TEST_CASE("tokenized truncates to max_seq_len and drops examples without a trained target", "[data][tokenized]") {
  test::TempDir dir;
  // Kept after truncation; truncated then dropped; one token; only labels[0] trained; kept.
  const auto file = dir.write("a.jsonl",
                              "{\"input_ids\": [1, 2, 3, 4, 5, 6]}\n"
                              "{\"input_ids\": [1, 2, 3, 4, 5, 6], \"labels\": [-100, -100, -100, -100, 5, 6]}\n"
                              "{\"input_ids\": [7]}\n"
                              "{\"input_ids\": [7, 8], \"labels\": [7, -100]}\n"
                              "{\"input_ids\": [9, 10], \"labels\": [-100, 10]}\n");
  DatasetStats stats;
  const auto examples = load(file, 4, &stats);
  REQUIRE(examples.size() == 2);
  CHECK(examples[0].input_ids == std::vector<int32_t>{1, 2, 3, 4});
  CHECK(examples[0].labels == std::vector<int32_t>{1, 2, 3, 4});
  CHECK(examples[1].input_ids == std::vector<int32_t>{9, 10});
  CHECK(stats.examples == 2);
  CHECK(stats.tokens == 6);
  CHECK(stats.truncated == 2);
  CHECK(stats.dropped == 3);
}

TEST_CASE("tokenized errors name the file and line", "[data][tokenized]") {
  test::TempDir dir;
  const std::string good = "{\"input_ids\": [1, 2]}\n";
  auto error_for = [&](const std::string& name, const std::string& bad_line) {
    const auto file = dir.write(name, good + good + bad_line + "\n" + good);
    return test::error_message([&] { load(file); });
  };
  const std::string prefix = (dir.path() / "x.jsonl").string();

  CHECK(error_for("x.jsonl", "{\"input_ids\": [1, 600]}") ==
        prefix + ":3: input_ids[1] = 600 is out of range for vocab_size 512");
  CHECK(error_for("x.jsonl", "{\"input_ids\": [1, -1]}").find(prefix + ":3: input_ids[1] = -1 is out of range") == 0);
  CHECK(error_for("x.jsonl", "{\"input_ids\": [1, 2], \"labels\": [1, -5]}").find(prefix + ":3: labels[1] = -5") == 0);
  CHECK(error_for("x.jsonl", "{\"input_ids\": [1, 2.5]}") == prefix + ":3: input_ids[1] = 2.5 is not an integer");
  CHECK(error_for("x.jsonl", "{\"input_ids\": []}") == prefix + ":3: input_ids is empty");
  CHECK(error_for("x.jsonl", "{\"labels\": [1]}") == prefix + ":3: missing \"input_ids\"");
  CHECK(error_for("x.jsonl", "{\"input_ids\": [1, 2], \"labels\": [1]}") ==
        prefix + ":3: labels has 1 entries but input_ids has 2");
  CHECK(error_for("x.jsonl", "[1, 2]") == prefix + ":3: expected an object, got array");

  const std::string malformed = error_for("x.jsonl", "{\"input_ids\": [1, 2}");
  CHECK(malformed.find(prefix + ":3: malformed JSON: ") == 0);
  CHECK(malformed.find("json.exception") == std::string::npos);
  CHECK(malformed.find('\n') == std::string::npos);
}

TEST_CASE("tokenized .json array errors name the element", "[data][tokenized]") {
  test::TempDir dir;
  const auto file = dir.write("x.json", "[{\"input_ids\": [1, 2]}, {\"input_ids\": [1, 512]}]");
  CHECK(test::error_message([&] { load(file); }) ==
        file.string() + ": element 2: input_ids[1] = 512 is out of range for vocab_size 512");
  const auto broken = dir.write("y.json", "[{\"input_ids\": [1, 2]},\n {\"input_ids\": [1, 2]");
  CHECK(test::error_message([&] { load(broken); }).find(broken.string() + ": malformed JSON: ") == 0);
}

TEST_CASE("tokenized file problems", "[data][tokenized]") {
  test::TempDir dir;
  CHECK(test::error_message([&] { load(dir.path() / "none.jsonl"); }) ==
        "dataset 't': " + (dir.path() / "none.jsonl").string() + ": file not found");
  const auto csv = dir.write("a.csv", "1,2\n");
  CHECK(test::error_message([&] { load(csv); }).find("expected a .json or .jsonl file") != std::string::npos);
}

}  // namespace mt
