// Alpaca and sharegpt records -> Conversations, following LLaMA-Factory's AlpacaDatasetConverter and
// SharegptDatasetConverter (and the supervised processor's "prompt odd, one response" check).
// Invariant: nothing is silently changed; every record that cannot be a conversation is skipped with its reason.
#include "data/formats/record_converter.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "data/templates/python_json.h"

namespace mt {
namespace {

using nlohmann::ordered_json;

const std::vector<std::string> kAlpacaColumns = {"prompt", "query", "response", "history", "system", "tools"};
const std::vector<std::string> kSharegptColumns = {"messages", "system", "tools"};
const std::vector<std::string> kUnsupportedColumns = {"images", "videos", "audios", "chosen", "rejected", "kto_tag"};
const std::vector<std::string> kTags = {"role_tag",      "content_tag",  "user_tag",  "assistant_tag",
                                        "observation_tag", "function_tag", "system_tag"};

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

ConvertedRecord skip(std::string category, std::string detail) {
  return {std::nullopt, std::move(category), std::move(detail)};
}

// record[column] as text: absent or null -> "", a string -> itself, anything else is an error.
std::string text_field(const ordered_json& object, const std::string& key, const std::string& what) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "";
  MT_REQUIRE(it->is_string(), "{} \"{}\" must be a string, got {}", what, key, it->type_name());
  return it->get<std::string>();
}

bool prompt_side(Role r) { return r == Role::user || r == Role::observation; }

}  // namespace

RecordConverter::RecordConverter(const DatasetEntry& entry) : sharegpt_(entry.formatting == "sharegpt") {
  MT_ASSERT(entry.formatting == "alpaca" || entry.formatting == "sharegpt");
  const std::vector<std::string>& own = sharegpt_ ? kSharegptColumns : kAlpacaColumns;
  const std::vector<std::string>& other = sharegpt_ ? kAlpacaColumns : kSharegptColumns;
  for (const auto& [role, name] : entry.columns) {
    MT_REQUIRE(!contains(kUnsupportedColumns, role), "dataset '{}': columns.{}: {}", entry.name, role,
               role == "chosen" || role == "rejected" ? "preference pairs need \"ranking\": true (training.stage dpo)"
                                                      : "multimodal and KTO data are not supported");
    MT_REQUIRE(contains(own, role) || contains(other, role), "dataset '{}': columns.{}: unknown column; accepted: {}",
               entry.name, role, fmt::join(own, ", "));
    MT_REQUIRE(contains(own, role), "dataset '{}': columns.{} is {} column but the entry's formatting is {}",
               entry.name, role, sharegpt_ ? "an alpaca" : "a sharegpt", entry.formatting);
    MT_REQUIRE(!name.empty(), "dataset '{}': columns.{} is empty", entry.name, role);
  }
  if (entry.columns.empty()) {  // LLaMA-Factory's defaults
    if (sharegpt_) columns_ = {{"messages", "conversations"}};
    else columns_ = {{"prompt", "instruction"}, {"query", "input"}, {"response", "output"}};
  } else {
    for (const std::string& role : own)
      if (entry.columns.count(role)) columns_.emplace_back(role, entry.columns.at(role));
  }
  const char* required = sharegpt_ ? "messages" : "response";
  MT_REQUIRE(!column(required).empty(),
             "dataset '{}': columns has no \"{}\" (a columns object replaces all of LLaMA-Factory's defaults)",
             entry.name, required);

  MT_REQUIRE(sharegpt_ || entry.tags.empty(), "dataset '{}': tags apply to formatting sharegpt only", entry.name);
  for (const auto& [name, value] : entry.tags) {
    MT_REQUIRE(contains(kTags, name), "dataset '{}': tags.{}: unknown tag; accepted: {}", entry.name, name,
               fmt::join(kTags, ", "));
    MT_REQUIRE(!value.empty(), "dataset '{}': tags.{} is empty", entry.name, name);
  }
  if (!sharegpt_) return;
  if (entry.tags.empty()) {
    tags_ = {{"role_tag", "from"},      {"content_tag", "value"},           {"user_tag", "human"},
             {"assistant_tag", "gpt"},  {"observation_tag", "observation"}, {"function_tag", "function_call"},
             {"system_tag", "system"}};
  } else {
    for (const std::string& name : kTags)
      if (entry.tags.count(name)) tags_.emplace_back(name, entry.tags.at(name));
  }
  for (const char* required : {"role_tag", "content_tag", "user_tag", "assistant_tag"})
    MT_REQUIRE(!tag(required).empty(), "dataset '{}': tags must set {} (tags replace all of LLaMA-Factory's defaults)",
               entry.name, required);
}

std::string RecordConverter::column(const std::string& role) const {
  for (const auto& [r, name] : columns_)
    if (r == role) return name;
  return "";
}

std::string RecordConverter::tag(const std::string& name) const {
  for (const auto& [n, value] : tags_)
    if (n == name) return value;
  return "";
}

ConvertedRecord RecordConverter::convert(const ordered_json& record) const {
  MT_REQUIRE(record.is_object(), "expected an object, got {}", record.type_name());
  ConvertedRecord out = sharegpt_ ? convert_sharegpt(record) : convert_alpaca(record);
  if (!out.conversation) return out;
  Conversation& c = *out.conversation;
  if (const std::string tools = column("tools"); !tools.empty()) {
    const auto it = record.find(tools);
    if (it != record.end() && (it->is_array() || it->is_object())) c.tools = python_json_dumps(*it);
    else c.tools = text_field(record, tools, "column");
  }
  return out;
}

ConvertedRecord RecordConverter::convert_alpaca(const ordered_json& record) const {
  Conversation c;
  if (const std::string history = column("history"); !history.empty()) {
    const auto it = record.find(history);
    if (it != record.end() && !it->is_null()) {
      MT_REQUIRE(it->is_array(), "column \"{}\" must be a list of [prompt, response] pairs, got {}", history,
                 it->type_name());
      for (size_t i = 0; i < it->size(); ++i) {
        const ordered_json& pair = (*it)[i];
        MT_REQUIRE(pair.is_array() && pair.size() == 2 && pair[0].is_string() && pair[1].is_string(),
                   "column \"{}\"[{}] must be a [prompt, response] pair of strings", history, i);
        c.turns.push_back({Role::user, pair[0].get<std::string>()});
        c.turns.push_back({Role::assistant, pair[1].get<std::string>()});
      }
    }
  }
  std::string query;
  for (const char* role : {"prompt", "query"}) {
    const std::string name = column(role);
    if (name.empty()) continue;
    const std::string part = text_field(record, name, "column");
    if (part.empty()) continue;
    query += (query.empty() ? "" : "\n") + part;
  }
  c.turns.push_back({Role::user, query});
  const std::string response = column("response");
  const auto it = record.find(response);
  if (it == record.end() || it->is_null())
    return skip("no response", fmt::format("column \"{}\" is missing or null", response));
  MT_REQUIRE(it->is_string(), "column \"{}\" must be a string, got {}", response, it->type_name());
  c.turns.push_back({Role::assistant, it->get<std::string>()});
  if (const std::string system = column("system"); !system.empty()) c.system = text_field(record, system, "column");
  return {std::move(c), "", ""};
}

ConvertedRecord RecordConverter::convert_sharegpt(const ordered_json& record) const {
  const std::string messages_column = column("messages");
  const auto list = record.find(messages_column);
  if (list == record.end() || list->is_null() || (list->is_array() && list->empty()))
    return skip("empty conversation", fmt::format("column \"{}\" has no messages", messages_column));
  MT_REQUIRE(list->is_array(), "column \"{}\" must be a list of messages, got {}", messages_column,
             list->type_name());
  const std::string role_tag = tag("role_tag"), content_tag = tag("content_tag");
  const std::string system_tag = tag("system_tag");
  Conversation c;
  size_t first = 0;
  std::vector<std::pair<std::string, std::string>> raw;  // (role, content) per message
  for (size_t i = 0; i < list->size(); ++i) {
    const ordered_json& m = (*list)[i];
    const std::string where = fmt::format("{}[{}]", messages_column, i);
    MT_REQUIRE(m.is_object(), "{} must be an object, got {}", where, m.type_name());
    raw.emplace_back(text_field(m, role_tag, where), text_field(m, content_tag, where));
  }
  if (!system_tag.empty() && raw[0].first == system_tag) {
    c.system = raw[0].second;
    first = 1;
  } else if (const std::string system = column("system"); !system.empty()) {
    c.system = text_field(record, system, "column");
  }
  if (first == raw.size()) return skip("empty conversation", "only a system message");
  const std::vector<std::pair<std::string, Role>> roles = {{tag("user_tag"), Role::user},
                                                           {tag("assistant_tag"), Role::assistant},
                                                           {tag("observation_tag"), Role::observation},
                                                           {tag("function_tag"), Role::function}};
  for (size_t i = first; i < raw.size(); ++i) {
    const std::string& name = raw[i].first;
    const auto known = std::find_if(roles.begin(), roles.end(),
                                    [&](const auto& r) { return !r.first.empty() && r.first == name; });
    if (known == roles.end()) {
      if (!name.empty() && name == system_tag)
        return skip("roles do not alternate",
                    fmt::format("{}[{}] is a system message after the first", messages_column, i));
      return skip("unknown role", name.empty()
                                      ? fmt::format("{}[{}] has no \"{}\"", messages_column, i, role_tag)
                                      : fmt::format("{}[{}] has {} \"{}\"", messages_column, i, role_tag, name));
    }
    const bool want_prompt = (i - first) % 2 == 0;
    if (prompt_side(known->second) != want_prompt)
      return skip("roles do not alternate",
                  fmt::format("{}[{}] is \"{}\" where {} was expected", messages_column, i, name,
                              want_prompt ? "a user or observation turn" : "an assistant or function turn"));
    c.turns.push_back({known->second, raw[i].second});
  }
  if (c.turns.size() % 2 != 0) return skip("no assistant turn at the end", "the last message is a prompt");
  return {std::move(c), "", ""};
}

}  // namespace mt
