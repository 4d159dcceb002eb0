// load_datasets (registry lookup, template choice, per-formatting loaders, concatenation) and the Batcher.
// Invariant: the example stream is a pure function of (examples, batch_size, shuffle, seed, cursor),
// identical on every standard library (own Fisher-Yates over std::mt19937_64's raw outputs).
#include "data/dataset.h"

#include <fmt/format.h>

#include <memory>
#include <optional>
#include <random>

#include "core/error.h"
#include "core/log.h"
#include "data/dataset_registry.h"
#include "data/formats/kto_loader.h"
#include "data/formats/pairwise_loader.h"
#include "data/formats/pretrain_loader.h"
#include "data/formats/text_loader.h"
#include "data/templates/chat_template.h"
#include "data/templates/jinja_chat_template.h"
#include "data/templates/template_renderer.h"
#include "data/tokenized_loader.h"
#include "data/tokenizer.h"

namespace mt {

std::vector<std::string> dataset_names(const std::string& list) {
  MT_REQUIRE(list.find_first_not_of(" \t") != std::string::npos,
             "dataset.name is empty: name one or more entries of dataset_info.json, comma-separated");
  std::vector<std::string> names;
  size_t begin = 0;
  while (true) {
    const size_t end = list.find(',', begin);
    const std::string piece = list.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    const size_t first = piece.find_first_not_of(" \t");
    MT_REQUIRE(first != std::string::npos, "dataset.name '{}': empty dataset name in the list", list);
    names.push_back(piece.substr(first, piece.find_last_not_of(" \t") - first + 1));
    if (end == std::string::npos) return names;
    begin = end + 1;
  }
}

namespace {

// Uniform in [0, bound) from raw 64-bit outputs, without modulo bias (rejects the short low range).
uint64_t uniform_below(std::mt19937_64& engine, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;
  uint64_t r = engine();
  while (r < threshold) r = engine();
  return r % bound;
}

// training.stage pt: every dataset's documents end to end, cut into max_seq_len blocks (per batch of
// preprocessing_batch_size documents when set, as LLaMA-Factory's batched preprocessing).
std::vector<Example> load_pretrain_blocks(const DatasetConfig& config, const std::vector<const DatasetEntry*>& entries,
                                          int64_t vocab_size, const TextOptions& text, DatasetStats* stats) {
  MT_REQUIRE(text.tokenizer != nullptr, "dataset.name '{}': training.stage pt needs the model's tokenizer "
             "(tokenizer.json in the model directory), but there is none", config.name);
  const PretrainTokens special = pretrain_tokens(config.template_name, *text.tokenizer, text.tokenizer_dir);
  std::vector<int32_t> stream;
  std::vector<size_t> document_ends;
  DatasetStats total;
  for (const DatasetEntry* entry : entries) {
    const size_t before = stream.size();
    const int64_t documents = append_documents(*entry, *text.tokenizer, special.eos, config.max_samples, vocab_size,
                                               stream, document_ends, text_sample_from_name(config.sample_by));
    log::info("dataset '{}': {} documents, {} tokens with their EOS{}", entry->name, documents, stream.size() - before,
              config.max_samples > 0 ? fmt::format(" (dataset.max_samples {})", config.max_samples) : "");
    total.documents += documents;
  }
  std::vector<Example> blocks = cut_blocks(stream, document_ends, config.preprocessing_batch_size, config.max_seq_len,
                                           special.bos, &total.dropped_tokens);
  MT_REQUIRE(!blocks.empty(), "dataset.name '{}': its {} tokens do not fill one block of dataset.max_seq_len {}",
             config.name, stream.size(), config.max_seq_len);
  total.examples = static_cast<int64_t>(blocks.size());
  total.tokens = total.examples * config.max_seq_len;
  log::info("training.stage pt: {} documents, {} tokens in {} blocks of {} tokens (EOS: {}{}); {}", total.documents,
            stream.size(), blocks.size(), config.max_seq_len, special.eos_source,
            special.bos ? "; each block opens with the BOS, add_bos_token" : "",
            config.preprocessing_batch_size > 0
                ? fmt::format("cut per batch of {} documents (dataset.preprocessing_batch_size), {} tokens of the "
                              "batches' remainders left out", config.preprocessing_batch_size, total.dropped_tokens)
                : fmt::format("the final {} tokens, less than a block, are left out", total.dropped_tokens));
  if (stats) *stats = total;
  return blocks;
}

}  // namespace

bool needs_tokenizer(const DatasetConfig& config) {
  const DatasetRegistry registry(config.dataset_dir);
  for (const std::string& name : dataset_names(config.name))
    if (registry.entry(name).formatting != "tokenized") return true;
  return false;
}

std::vector<Example> load_datasets(const DatasetConfig& config, int64_t vocab_size, const TextOptions& text,
                                   DatasetStats* stats) {
  MT_REQUIRE(config.max_seq_len > 0, "dataset.max_seq_len must be positive, got {}", config.max_seq_len);
  MT_REQUIRE(vocab_size > 0 && vocab_size <= (int64_t{1} << 31), "vocab_size {} is out of range", vocab_size);
  const DatasetRegistry registry(config.dataset_dir);
  std::vector<Example> examples;
  DatasetStats total;
  // Every name (and the template, if a text dataset needs one) resolves before any file is read, so a typo in the
  // last one fails at once.
  std::vector<const DatasetEntry*> entries;
  std::unique_ptr<TemplateRenderer> renderer;
  for (const std::string& name : dataset_names(config.name)) {
    const DatasetEntry& entry = registry.entry(name);
    const bool tagged = entry.columns.count("kto_tag") > 0;
    MT_REQUIRE(!tagged || text.unpaired, "{}: dataset '{}': columns.kto_tag is KTO's unpaired data, which training.stage "
               "kto trains (not {})", registry.info_file().string(), name, text.pairwise ? "dpo" : "sft or pt");
    MT_REQUIRE(!text.unpaired || (tagged && !entry.ranking), "{}: dataset '{}': {}", registry.info_file().string(),
               name, entry.ranking ? "ranking: true is preference pairs, which training.stage dpo trains (not kto)"
                                   : "training.stage kto trains on examples tagged desirable or not; this entry names "
                                     "no columns.kto_tag");
    MT_REQUIRE(text.unpaired || entry.ranking == text.pairwise,
               "{}: dataset '{}': {}", registry.info_file().string(), name,
               entry.ranking ? "ranking: true is preference pairs, which training.stage dpo trains (not sft or pt)"
                             : "training.stage dpo trains on preference pairs; this entry has no \"ranking\": true");
    entries.push_back(&entry);
    if (text.pretrain) continue;
    if (entry.formatting == "tokenized" || renderer) continue;
    MT_REQUIRE(text.tokenizer != nullptr,
               "dataset '{}': formatting {} is text and needs the model's tokenizer (tokenizer.json in the model "
               "directory), but there is none",
               name, entry.formatting);
    const std::string template_name = config.template_name == "auto"
                                          ? auto_template_name(text.model_family, *text.tokenizer)
                                          : config.template_name;
    if (template_name == "jinja") {
      const TokenizerChatTemplate source = read_tokenizer_chat_template(text.tokenizer_dir);
      renderer = std::make_unique<TemplateRenderer>(chat_template_from_jinja(source, *text.tokenizer), *text.tokenizer);
      log::info("chat template: the tokenizer's own ({}), cut into per-role slots as LLaMA-Factory's parse_template "
                "does", source.file);
      continue;
    }
    renderer = std::make_unique<TemplateRenderer>(find_chat_template(template_name), *text.tokenizer);
    log::info("chat template '{}'{}", template_name, config.template_name == "auto" ? " (template: auto)" : "");
  }
  if (text.pretrain) return load_pretrain_blocks(config, entries, vocab_size, text, stats);
  const TextLimits limits{config.max_seq_len, config.train_on_prompt, vocab_size};
  // KTO text datasets: every one's records first, merged in order, for the KL shift over them (kto_loader.h).
  std::vector<KtoRecord> kto_records;
  std::vector<size_t> kto_first(entries.size(), 0), kto_count(entries.size(), 0);
  std::vector<DatasetStats> parts(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!text.unpaired || entries[i]->formatting == "tokenized") continue;
    std::vector<KtoRecord> records = read_kto_records(*entries[i], config.max_samples, &parts[i]);
    kto_first[i] = kto_records.size();
    kto_count[i] = records.size();
    kto_records.insert(kto_records.end(), std::make_move_iterator(records.begin()),
                       std::make_move_iterator(records.end()));
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const DatasetEntry* entry = entries[i];
    DatasetStats& part = parts[i];
    const bool tokenized = entry->formatting == "tokenized";
    std::vector<Example> loaded =
        text.unpaired  ? (tokenized ? load_kto_tokenized(*entry, vocab_size, config.max_seq_len, &part)
                                    : shifted_kto_examples(kto_records, kto_first[i], kto_count[i],
                                                           config.preprocessing_batch_size > 0
                                                               ? config.preprocessing_batch_size
                                                               : kKtoShiftBlock,
                                                           *renderer, limits, &part))
        : entry->ranking ? (tokenized ? load_pairwise_tokenized(*entry, vocab_size, config.max_seq_len, &part)
                                      : load_pairwise_text(*entry, *renderer, limits, &part))
                         : (tokenized ? load_tokenized(*entry, vocab_size, config.max_seq_len, &part)
                                      : load_text(*entry, *renderer, limits, &part));
    if (config.max_samples > 0 && static_cast<int64_t>(loaded.size()) > config.max_samples) {
      for (size_t k = static_cast<size_t>(config.max_samples); k < loaded.size(); ++k) {
        --part.examples;
        part.tokens -= static_cast<int64_t>(loaded[k].input_ids.size() + loaded[k].rejected_ids.size() +
                                            loaded[k].kl_ids.size());
      }
      loaded.resize(static_cast<size_t>(config.max_samples));
      log::info("dataset '{}': dataset.max_samples keeps its first {} examples", entry->name, config.max_samples);
    }
    log::info("dataset '{}': {} examples, {} tokens ({} truncated to {} tokens, {} dropped with no trained token{})",
              entry->name, part.examples, part.tokens, part.truncated, config.max_seq_len, part.dropped,
              part.skipped ? fmt::format(", {} records skipped", part.skipped) : "");
    examples.insert(examples.end(), std::make_move_iterator(loaded.begin()), std::make_move_iterator(loaded.end()));
    total.examples += part.examples;
    total.tokens += part.tokens;
    total.truncated += part.truncated;
    total.dropped += part.dropped;
    total.skipped += part.skipped;
  }
  MT_REQUIRE(!examples.empty(), "dataset.name '{}': no examples to train on ({} dropped with no trained token{})",
             config.name, total.dropped,
             total.skipped ? fmt::format(", {} records skipped", total.skipped) : "");
  if (stats) *stats = total;
  return examples;
}

Batcher::Batcher(std::vector<Example> examples, int64_t batch_size, bool shuffle, uint64_t seed)
    : examples_(std::move(examples)), batch_size_(batch_size), shuffle_(shuffle), seed_(seed) {
  MT_REQUIRE(!examples_.empty(), "the dataset has no examples");
  MT_REQUIRE(batch_size_ > 0, "batch_size must be positive, got {}", batch_size_);
  build_order();
}

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::mt19937_64 engine(seed);
  for (size_t i = order.size(); i-- > 1;) std::swap(order[i], order[uniform_below(engine, i + 1)]);
  return order;
}

void Batcher::build_order() {
  if (shuffle_) {
    order_ = seeded_permutation(num_examples(), seed_ ^ (static_cast<uint64_t>(cursor_.epoch) * 0x9E3779B97F4A7C15ULL));
    return;
  }
  order_.resize(examples_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int64_t>(i);
}

std::vector<int64_t> Batcher::next_indices() {
  std::vector<int64_t> indices;
  indices.reserve(static_cast<size_t>(batch_size_));
  for (int64_t k = 0; k < batch_size_; ++k) {
    indices.push_back(order_[static_cast<size_t>(cursor_.index)]);
    if (++cursor_.index == num_examples()) {
      cursor_ = {cursor_.epoch + 1, 0};
      build_order();
    }
  }
  return indices;
}

Batch Batcher::batch(const std::vector<int64_t>& indices) {
  std::vector<Example> picked;
  picked.reserve(indices.size());
  for (const int64_t i : indices) picked.push_back(examples_[static_cast<size_t>(i)]);
  return make_batch(picked);
}

void Batcher::seek(const DataCursor& cursor) {
  MT_REQUIRE(cursor.epoch >= 0 && cursor.index >= 0 && cursor.index <= num_examples(),
             "data cursor (epoch {}, index {}) does not fit a dataset of {} examples (did the dataset change?)",
             cursor.epoch, cursor.index, num_examples());
  cursor_ = cursor.index == num_examples() ? DataCursor{cursor.epoch + 1, 0} : cursor;
  build_order();
}

}  // namespace mt
