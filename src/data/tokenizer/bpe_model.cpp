// BPE: the word's characters become symbols (vocab ids, else <0xNN> bytes, else unk), then a min-heap of
// candidate merges keyed by (rank, position) over a doubly linked list of symbols merges them; stale heap entries
// are recognised and skipped. Results of words shorter than 256 bytes are cached.
#include "data/tokenizer/bpe_model.h"

#include <queue>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer/json_fields.h"
#include "data/tokenizer/utf8.h"

namespace mt::tok {
namespace {

constexpr size_t max_cached_word_bytes = 256;

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool removed;
};

// A merge queued for the pair (left, right) at position pos. Symbols only grow, so the pair at pos changed since
// it was queued exactly when either id differs now: then the entry is stale (tokenizers' check that the pair
// still merges into merged_id decides the same).
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t left;
  int32_t right;
  int32_t merged_id;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

// A merge entry as its two token strings: "a b" (older files) or ["a", "b"].
std::pair<std::string, std::string> merge_pair(const nlohmann::json& m, const std::string& where) {
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  MT_REQUIRE(m.is_string(), "{}: expected \"a b\" or [\"a\", \"b\"], got {}", where, m.dump());
  const std::string s = m.get<std::string>();
  const size_t space = s.find(' ');
  MT_REQUIRE(space != std::string::npos && s.find(' ', space + 1) == std::string::npos,
             "{}: expected two tokens separated by one space, got \"{}\"", where, s);
  return {s.substr(0, space), s.substr(space + 1)};
}

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model, const std::string& where) {
  const nlohmann::json& vocab = required_field(model, "vocab", where);
  MT_REQUIRE(vocab.is_object(), "{}: expected an object of token: id", child(where, "vocab"));
  int32_t limit = 0;
  vocab_.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    MT_REQUIRE(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (int64_t{1} << 30),
               "{}: token \"{}\" has id {}, expected a non-negative integer", child(where, "vocab"), token, id.dump());
    const int32_t i = id.get<int32_t>();
    vocab_.emplace(token, i);
    limit = std::max(limit, i + 1);
  }
  tokens_.assign(limit, std::string());
  has_token_.assign(limit, false);
  for (const auto& [token, id] : vocab_) {
    tokens_[id] = token;
    has_token_[id] = true;
  }

  for (const char* unsupported : {"continuing_subword_prefix", "end_of_word_suffix"})
    MT_REQUIRE(!optional_string(model, unsupported, where), "{}: a non-null {} is not supported (BPE models of "
               "byte-level and SentencePiece checkpoints have null)", where, unsupported);
  const auto dropout = model.find("dropout");
  MT_REQUIRE(dropout == model.end() || dropout->is_null() || (dropout->is_number() && dropout->get<double>() == 0.0),
             "{}: BPE dropout {} is not supported (encoding must be deterministic)", where, dropout->dump());
  byte_fallback_ = bool_field(model, "byte_fallback", false, where);
  ignore_merges_ = bool_field(model, "ignore_merges", false, where);
  fuse_unk_ = bool_field(model, "fuse_unk", false, where);
  if (const auto unk = optional_string(model, "unk_token", where)) {
    const auto id = token_to_id(*unk);
    MT_REQUIRE(id, "{}: unk_token \"{}\" is not in the vocab", where, *unk);
    unk_id_ = *id;
  }
  for (int b = 0; b < 256; ++b) byte_ids_[b] = token_to_id(fmt::format("<0x{:02X}>", b)).value_or(-1);
  for (int c = 0; c < 128; ++c) ascii_ids_[c] = token_to_id(std::string(1, static_cast<char>(c))).value_or(-1);

  const std::string merges_where = child(where, "merges");
  const nlohmann::json& merges = required_field(model, "merges", where);
  MT_REQUIRE(merges.is_array(), "{}: expected an array", merges_where);
  merges_ = MergeTable(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string at = child(merges_where, rank);
    const auto [left, right] = merge_pair(merges[rank], at);
    const auto left_id = token_to_id(left), right_id = token_to_id(right), merged_id = token_to_id(left + right);
    MT_REQUIRE(left_id && right_id && merged_id, "{}: \"{}\" is not in the vocab", at,
               !left_id ? left : !right_id ? right : left + right);
    merges_.insert(*left_id, *right_id, Merge{static_cast<int32_t>(rank), *merged_id});
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_limit() || !has_token_[id]) return nullptr;
  return &tokens_[id];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() < max_cached_word_bytes;
  if (cacheable && cache_.find(word, out)) return;
  const size_t first = out.size();
  merge_word(word, out);
  if (cacheable) cache_.insert(word, std::span<const int32_t>(out).subspan(first));
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  const auto add = [&](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, false});
  };
  int32_t pending_unk = 0;  // characters waiting to become one (fused) or several unk symbols
  const auto flush_unk = [&] {
    for (; pending_unk > 0; pending_unk = fuse_unk_ ? 0 : pending_unk - 1) add(unk_id_);
  };
  for (size_t i = 0; i < word.size();) {
    const size_t begin = i;
    next_code_point(word, i);
    const std::string_view ch = word.substr(begin, i - begin);
    const int32_t id = ch.size() == 1 ? ascii_ids_[static_cast<uint8_t>(ch[0])] : token_to_id(ch).value_or(-1);
    if (id >= 0) {
      flush_unk();
      add(id);
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes = true;
      for (const char b : ch) all_bytes = all_bytes && byte_ids_[static_cast<uint8_t>(b)] >= 0;
      if (all_bytes) {  // a pending unk stays pending across byte tokens, as in tokenizers
        for (const char b : ch) add(byte_ids_[static_cast<uint8_t>(b)]);
        continue;
      }
    }
    if (unk_id_ >= 0) ++pending_unk;
  }
  flush_unk();
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    const Merge m = merges_.find(symbols[pos].id, symbols[next].id);
    if (m.rank >= 0) queue.push({m.rank, pos, symbols[pos].id, symbols[next].id, m.merged_id});
  };
  for (int32_t pos = 0; pos + 1 < static_cast<int32_t>(symbols.size()); ++pos) consider(pos);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.removed || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (left.id != top.left || right.id != top.right) continue;  // stale
    left.id = top.merged_id;
    right.removed = true;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (const Symbol& s : symbols)
    if (!s.removed) out.push_back(s.id);
}

}  // namespace mt::tok
