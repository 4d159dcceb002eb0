// The tokenizer is shared between threads: concurrent encodes agree with a sequential one, and the bounded word
// cache gives the same ids cold, warm and after it was emptied.
#include <string>
#include <thread>
#include <vector>

#include "catch.h"
#include "data/tokenizer.h"
#include "data/tokenizer/utf8.h"

namespace {

const std::string fixtures = MEGATRAIN_SOURCE_DIR "/tests/tokenizer/fixtures/";

std::vector<std::string> sample_texts() {
  std::vector<std::string> texts;
  for (int i = 0; i < 400; ++i)
    texts.push_back("Sample " + std::to_string(i * 7919) + ": the quick brown fox, 中文文本" + std::to_string(i) +
                    " DON'T stop\n\tword" + std::to_string(i % 37) + " <|im_end|> 😀");
  return texts;
}

}  // namespace

TEST_CASE("concurrent encodes agree with sequential ones") {
  const auto tokenizer = mt::Tokenizer::from_directory(fixtures + "qwen2");
  const std::vector<std::string> texts = sample_texts();
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& t : texts) expected.push_back(tokenizer->encode(t));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (int round = 0; round < 3; ++round)
        for (size_t i = w; i < texts.size(); i += 1 + w) mismatches[w] += tokenizer->encode(texts[i]) != expected[i];
    });
  for (auto& t : threads) t.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

TEST_CASE("results do not depend on the word cache, also after it overflowed") {
  const auto tokenizer = mt::Tokenizer::from_directory(fixtures + "gpt2");
  const std::string probe = " w0 w31 w62 the quick brown fox";
  const std::vector<int32_t> probe_cold = tokenizer->encode(probe);
  std::string text;
  for (int i = 0; i < 80000; ++i) text += " w" + std::to_string(i * 31);  // more distinct words than the cache holds
  const std::vector<int32_t> cold = tokenizer->encode(text);
  CHECK(tokenizer->encode(text) == cold);
  CHECK(tokenizer->encode(probe) == probe_cold);
}

TEST_CASE("invalid UTF-8 is repaired per maximal subpart, as Python's errors='replace'") {
  using mt::tok::to_valid_utf8;
  const std::string r = "\xEF\xBF\xBD";
  CHECK(to_valid_utf8("plain ascii, 中文") == "plain ascii, 中文");
  CHECK(to_valid_utf8("\xF0\x9F\x98") == r);                    // truncated 4-byte sequence: one replacement
  CHECK(to_valid_utf8("\xED\xA0\x80") == r + r + r);            // surrogate: each byte
  CHECK(to_valid_utf8("\xC0\xAF") == r + r);                    // overlong: each byte
  CHECK(to_valid_utf8("\xE4\xB8" "a") == r + "a");              // truncated, then ASCII
  CHECK(to_valid_utf8("\xF4\x90\x80\x80") == r + r + r + r);    // above U+10FFFF
  CHECK(to_valid_utf8("a\x80\x80z") == "a" + r + r + "z");      // stray continuation bytes
}
