// Byte-level fuzz of the readers of untrusted files (issue #20): safetensors, config.json, tokenizer.json and the
// dataset readers (records and tokenized), each fed a few hundred mutants of a real fixture file drawn from a
// fixed seed list. Every mutant is either read or refused with mt::Error — no crash, no hang, no other exception —
// and a safetensors file that is read has tensors that tile its data region exactly (checked here independently
// of the reader, from the file's bytes).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "data/dataset_registry.h"
#include "data/formats/json_records.h"
#include "data/tokenized_loader.h"
#include "data/tokenizer.h"
#include "integration/fixture_run.h"
#include "io/safetensors.h"
#include "model/model_spec.h"

namespace fs = std::filesystem;

namespace {

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// One mutant of `text`: 1 to 4 edits among flipping a byte, inserting a JSON structural byte, deleting or
// duplicating a short range, truncating. `focus` bytes from the start get most edits (a safetensors header).
std::string mutate(const std::string& text, uint32_t seed, size_t focus) {
  std::mt19937 rng(seed);
  std::string m = text;
  const char structural[] = "[]{}\",:0123456789-e.\\ ";
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !m.empty(); ++e) {
    const size_t span = (rng() % 4 != 0 && focus > 0) ? std::min(focus, m.size()) : m.size();
    const size_t at = rng() % span;
    switch (rng() % 6) {
      case 0: m[at] = static_cast<char>(rng()); break;
      case 1: m.insert(m.begin() + static_cast<std::ptrdiff_t>(at), structural[rng() % (sizeof(structural) - 1)]); break;
      case 2: m.erase(at, 1 + rng() % 8); break;
      case 3: m.insert(at, m.substr(at, 1 + rng() % 16)); break;
      case 4: m.resize(at); break;
      default: m[at] = structural[rng() % (sizeof(structural) - 1)]; break;
    }
  }
  return m;
}

constexpr uint32_t kVariants = 300;

// Runs read() on every mutant written to `file`; returns how many were read without an error.
template <typename Read>
int fuzz(const fs::path& file, const std::string& original, size_t focus, Read read) {
  int accepted = 0;
  for (uint32_t seed = 1; seed <= kVariants; ++seed) {
    write_bytes(file, mutate(original, seed, focus));
    try {
      read();
      ++accepted;
    } catch (const mt::Error&) {
    } catch (const std::exception& e) {
      FAIL("seed " << seed << ": not an mt::Error: " << e.what());
    }
  }
  return accepted;
}

}  // namespace

TEST_CASE("fuzzed safetensors are read only when their tensors tile the data region", "[fuzz]") {
  const fs::path dir = mt::testing::fresh_scratch_dir("fuzz_safetensors");
  fs::create_directories(dir);
  const std::string original = read_bytes(mt::testing::fixture_dir("llama") / "model" / "model.safetensors");
  uint64_t header_len = 0;
  std::memcpy(&header_len, original.data(), 8);
  const fs::path file = dir / "model.safetensors";
  const int accepted = fuzz(file, original, 8 + header_len, [&] {
    const mt::SafetensorsFile st(file);
    const std::string bytes = read_bytes(file);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    // Offsets from the lowest tensor: contiguous, and summing with the header to the file size, they leave no
    // room for a gap at the start either.
    const std::byte* lowest = nullptr;
    for (const auto& [name, t] : st.tensors()) lowest = lowest ? std::min(lowest, t.data) : t.data;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const auto& [name, t] : st.tensors())
      ranges.emplace_back(static_cast<uint64_t>(t.data - lowest), static_cast<uint64_t>(t.data - lowest) + t.nbytes);
    std::sort(ranges.begin(), ranges.end());
    uint64_t end = 0;
    for (const auto& [b, e] : ranges) {
      REQUIRE(b == end);
      end = e;
    }
    REQUIRE(8 + n + end == bytes.size());
  });
  INFO(accepted << " of " << kVariants << " mutants read");
  SUCCEED();
}

TEST_CASE("fuzzed config.json is read or refused with mt::Error", "[fuzz]") {
  const fs::path dir = mt::testing::fresh_scratch_dir("fuzz_config");
  fs::create_directories(dir);
  const fs::path file = dir / "config.json";
  const std::string original = read_bytes(mt::testing::fixture_dir("llama") / "model" / "config.json");
  fuzz(file, original, 0, [&] { mt::load_model_spec(file, false); });
}

TEST_CASE("fuzzed tokenizer.json is read or refused with mt::Error", "[fuzz]") {
  const fs::path dir = mt::testing::fresh_scratch_dir("fuzz_tokenizer");
  fs::create_directories(dir);
  const fs::path demo = fs::path(MEGATRAIN_SOURCE_DIR) / "configs" / "models" / "demo";
  fs::copy_file(demo / "tokenizer_config.json", dir / "tokenizer_config.json");
  const std::string original = read_bytes(demo / "tokenizer.json");
  // The structure (normalizer, pre_tokenizer, model type) is at both ends; the middle is the vocabulary.
  fuzz(dir / "tokenizer.json", original, 2000, [&] { mt::Tokenizer::from_directory(dir); });
}

TEST_CASE("fuzzed dataset files are read or refused with mt::Error", "[fuzz]") {
  const fs::path dir = mt::testing::fresh_scratch_dir("fuzz_dataset");
  fs::create_directories(dir);
  SECTION("records (alpaca .json)") {
    const std::string original = read_bytes(fs::path(MEGATRAIN_SOURCE_DIR) / "data" / "alpaca_en_demo.json").substr(0, 4000);
    const fs::path file = dir / "records.json";
    fuzz(file, original, 0, [&] { mt::read_json_records(file, "fuzz"); });
  }
  SECTION("tokenized (.jsonl)") {
    const std::string original = read_bytes(mt::testing::fixture_dir("llama") / "data" / "train.jsonl");
    mt::DatasetEntry entry;
    entry.name = "fuzz";
    entry.file = dir / "train.jsonl";
    entry.formatting = "tokenized";
    fuzz(entry.file, original, 0, [&] { mt::load_tokenized(entry, 128, 64, nullptr); });
  }
}
