// Preference pairs: records -> (prompt, chosen, rejected) -> chat template -> pair truncation (see pairwise_loader.h).
// Invariant: the prompt of a pair is rendered once for both responses (they differ only in the last answer), and
// every error names "dataset '<name>': <file>:<line>:".
#include "data/formats/pairwise_loader.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "data/formats/record_checks.h"
#include "data/formats/record_converter.h"
#include "data/formats/record_files.h"
#include "data/formats/truncation.h"

namespace mt {
namespace {

using nlohmann::ordered_json;

// The column a pairwise entry names for `role` (chosen, rejected); LLaMA-Factory has no default for them.
std::string required_column(const DatasetEntry& entry, const std::string& role) {
  const auto it = entry.columns.find(role);
  MT_REQUIRE(it != entry.columns.end() && !it->second.empty(),
             "dataset '{}': ranking: true needs columns.{} (the {} response) in dataset_info.json", entry.name, role,
             role);
  return it->second;
}

// The entry without its preference columns, reading `response_column` as its (alpaca) response: what the ordinary
// converter renders for one side of the pair.
DatasetEntry one_side(const DatasetEntry& entry, const std::string& response_column) {
  DatasetEntry side = entry;
  side.ranking = false;
  side.columns.erase("chosen");
  side.columns.erase("rejected");
  if (entry.formatting == "alpaca") side.columns["response"] = response_column;
  return side;
}

struct RenderedPair {
  std::vector<int32_t> prompt, chosen, rejected;
};

class PairConverter {
 public:
  explicit PairConverter(const DatasetEntry& entry)
      : entry_(entry),
        chosen_column_(required_column(entry, "chosen")),
        rejected_column_(required_column(entry, "rejected")),
        chosen_(one_side(entry, chosen_column_)),
        rejected_(one_side(entry, rejected_column_)) {}

  std::vector<std::pair<std::string, std::string>> columns() const {
    std::vector<std::pair<std::string, std::string>> all = chosen_.columns();
    if (entry_.formatting == "alpaca") std::erase_if(all, [](const auto& c) { return c.first == "response"; });
    all.emplace_back("chosen", chosen_column_);
    all.emplace_back("rejected", rejected_column_);
    return all;
  }

  // Both sides as conversations; nullopt (with the reason) where the record is no pair.
  std::pair<std::optional<Conversation>, std::optional<Conversation>> convert(const ordered_json& record,
                                                                               ConvertedRecord& skipped) const {
    MT_REQUIRE(record.is_object(), "expected an object, got {}", record.type_name());
    if (entry_.formatting == "alpaca") {
      for (const std::string& column : {chosen_column_, rejected_column_}) {
        const auto it = record.find(column);
        MT_REQUIRE(it == record.end() || it->is_null() || it->is_string(), "column \"{}\" must be a string, got {}",
                   column, it->type_name());
      }
      ConvertedRecord c = chosen_.convert(record), r = rejected_.convert(record);
      if (!c.conversation) skipped = c;
      else if (!r.conversation) skipped = r;
      return {c.conversation, r.conversation};
    }
    // sharegpt: the conversation up to its last prompt, then the chosen or the rejected message.
    const std::string messages = entry_.columns.count("messages") ? entry_.columns.at("messages") : "conversations";
    std::optional<Conversation> sides[2];
    const std::string* columns[2] = {&chosen_column_, &rejected_column_};
    const RecordConverter* converters[2] = {&chosen_, &rejected_};
    for (int s = 0; s < 2; ++s) {
      const auto it = record.find(*columns[s]);
      MT_REQUIRE(it != record.end() && it->is_object(), "column \"{}\" must be a message object, got {}",
                 *columns[s], it == record.end() ? "nothing" : it->type_name());
      ordered_json side = record;
      if (!side.contains(messages) || side[messages].is_null()) side[messages] = ordered_json::array();
      MT_REQUIRE(side[messages].is_array(), "column \"{}\" must be a list of messages, got {}", messages,
                 side[messages].type_name());
      side[messages].push_back(*it);
      ConvertedRecord c = converters[s]->convert(side);
      if (!c.conversation) {
        skipped = c;
        return {std::nullopt, std::nullopt};
      }
      sides[s] = std::move(c.conversation);
    }
    return {sides[0], sides[1]};
  }

 private:
  const DatasetEntry& entry_;
  std::string chosen_column_, rejected_column_;
  RecordConverter chosen_, rejected_;
};

}  // namespace

std::pair<std::vector<int32_t>, std::vector<int32_t>> one_turn(const std::vector<EncodedPair>& pairs) {
  std::vector<int32_t> prompt;
  for (size_t i = 0; i < pairs.size(); ++i) {
    prompt.insert(prompt.end(), pairs[i].prompt.begin(), pairs[i].prompt.end());
    if (i + 1 < pairs.size()) prompt.insert(prompt.end(), pairs[i].response.begin(), pairs[i].response.end());
  }
  return {prompt, pairs.back().response};
}

Example assemble_pair(const std::vector<int32_t>& prompt, const std::vector<int32_t>& chosen,
                      const std::vector<int32_t>& rejected, int64_t cutoff, bool* truncated) {
  const auto [source, target] = infer_seqlen(static_cast<int64_t>(prompt.size()),
                                             static_cast<int64_t>(std::max(chosen.size(), rejected.size())), cutoff);
  const auto n_source = static_cast<size_t>(source), n_target = static_cast<size_t>(target);
  *truncated = n_source < prompt.size() || n_target < std::max(chosen.size(), rejected.size());
  Example e;
  auto side = [&](const std::vector<int32_t>& response, std::vector<int32_t>& ids, std::vector<int32_t>& labels) {
    const size_t n = std::min(n_target, response.size());
    ids.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(n_source));
    ids.insert(ids.end(), response.begin(), response.begin() + static_cast<std::ptrdiff_t>(n));
    labels.assign(n_source, kIgnoreIndex);
    labels.insert(labels.end(), response.begin(), response.begin() + static_cast<std::ptrdiff_t>(n));
  };
  side(chosen, e.input_ids, e.labels);
  side(rejected, e.rejected_ids, e.rejected_labels);
  return e;
}

std::vector<Example> load_pairwise_text(const DatasetEntry& entry, const TemplateRenderer& renderer,
                                        const TextLimits& limits, DatasetStats* stats) {
  MT_ASSERT(entry.ranking && limits.max_seq_len > 0 && limits.vocab_size > 0);
  const PairConverter converter(entry);
  const std::vector<JsonRecord> records = read_records(entry.file, entry.name);
  for (const auto& [role, name] : converter.columns()) {
    const bool present = records.empty() || std::any_of(records.begin(), records.end(), [&](const JsonRecord& r) {
      return r.value.is_object() && r.value.contains(name);
    });
    MT_REQUIRE(present, "dataset '{}': {}: no record has the column \"{}\" (columns.{})", entry.name,
               entry.file.string(), name, role);
  }
  std::vector<Example> pairs;
  DatasetStats part;
  SkippedRecords skips;
  for (const JsonRecord& record : records) {
    const std::string where = fmt::format("dataset '{}': {}:{}", entry.name, entry.file.string(), record.line);
    ConvertedRecord skipped;
    std::vector<EncodedPair> chosen, rejected;
    try {
      const auto [c, r] = converter.convert(record.value, skipped);
      if (c && r) {
        const std::string& chosen_text = c->turns.back().content;
        const std::string& rejected_text = r->turns.back().content;
        MT_REQUIRE(!chosen_text.empty() && !rejected_text.empty(), "the {} response is empty",
                   chosen_text.empty() ? "chosen" : "rejected");
        MT_REQUIRE(chosen_text != rejected_text || c->turns.back().role != r->turns.back().role,
                   "chosen and rejected are the same response '{}'", chosen_text.substr(0, 60));
        chosen = renderer.encode(*c);
        rejected = renderer.encode(*r);
      }
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", where, e.what()));
    }
    if (chosen.empty()) {
      skips.add(skipped, entry, record.line);
      continue;
    }
    auto [prompt, chosen_ids] = one_turn(chosen);
    auto [rejected_prompt, rejected_ids] = one_turn(rejected);
    MT_ASSERT(prompt == rejected_prompt, "a pair's two renderings share the prompt");
    if (const std::optional<int32_t> eos = renderer.efficient_eos()) {  // LLaMA-Factory appends it before cutting
      chosen_ids.push_back(*eos);
      rejected_ids.push_back(*eos);
    }
    bool truncated = false;
    Example pair = assemble_pair(prompt, chosen_ids, rejected_ids, limits.max_seq_len, &truncated);
    require_in_vocab(pair.input_ids, limits.vocab_size, where);
    require_in_vocab(pair.rejected_ids, limits.vocab_size, where);
    if (keep_two_sequences(pair.input_ids, pair.labels, pair.rejected_ids, pair.rejected_labels, truncated, part))
      pairs.push_back(std::move(pair));
  }
  part.skipped = skips.count();
  skips.warn(entry, records.size());
  add_stats(part, stats);
  return pairs;
}

std::vector<Example> load_pairwise_tokenized(const DatasetEntry& entry, int64_t vocab_size, int64_t max_seq_len,
                                             DatasetStats* stats) {
  MT_ASSERT(entry.ranking && vocab_size > 0 && max_seq_len > 0);
  const std::vector<JsonRecord> records = read_records(entry.file, entry.name);
  std::vector<Example> pairs;
  DatasetStats part;
  for (const JsonRecord& record : records) {
    const std::string where = fmt::format("dataset '{}': {}:{}", entry.name, entry.file.string(), record.line);
    MT_REQUIRE(record.value.is_object(), "{}: expected an object, got {}", where, record.value.type_name());
    auto ids_of = [&](const std::string& role, bool labels) {
      return token_id_column(record.value, entry.column(role), where, vocab_size, labels);
    };
    Example pair;
    pair.input_ids = ids_of("chosen_input_ids", false);
    pair.labels = ids_of("chosen_labels", true);
    pair.rejected_ids = ids_of("rejected_input_ids", false);
    pair.rejected_labels = ids_of("rejected_labels", true);
    MT_REQUIRE(pair.labels.size() == pair.input_ids.size() && pair.rejected_labels.size() == pair.rejected_ids.size(),
               "{}: each sequence's labels must be as long as its input ids", where);
    MT_REQUIRE(pair.input_ids != pair.rejected_ids || pair.labels != pair.rejected_labels,
               "{}: chosen and rejected are the same sequence", where);
    const bool truncated =
        cut_to(max_seq_len, {&pair.input_ids, &pair.labels, &pair.rejected_ids, &pair.rejected_labels});
    if (keep_two_sequences(pair.input_ids, pair.labels, pair.rejected_ids, pair.rejected_labels, truncated, part))
      pairs.push_back(std::move(pair));
  }
  add_stats(part, stats);
  return pairs;
}

}  // namespace mt
