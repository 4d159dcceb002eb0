// read_tokenizer_chat_template and chat_template_from_jinja (LLaMA-Factory's parse_template), see the header.
#include "data/templates/jinja_chat_template.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/json_depth.h"
#include "data/templates/jinja/template.h"
#include "data/templates/jinja/text.h"
#include "data/tokenizer.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  MT_REQUIRE(in.good(), "{}: cannot read", path.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text of a special token entry: a string, or an AddedToken object's "content".
std::optional<std::string> token_text(const ordered_json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string())
    return entry["content"].get<std::string>();
  return std::nullopt;
}

// Python's s[n:] with n code points.
std::string drop_code_points(const std::string& s, size_t n) {
  const std::vector<std::string> cps = jinja::code_points(s);
  std::string out;
  for (size_t i = n; i < cps.size(); ++i) out += cps[i];
  return out;
}
size_t code_point_count(const std::string& s) { return jinja::code_points(s).size(); }

// LLaMA-Factory's find_diff: the characters of long_str skipped while walking both strings in step.
std::string find_diff(const std::string& short_str, const std::string& long_str) {
  const std::vector<std::string> a = jinja::code_points(short_str), b = jinja::code_points(long_str);
  size_t i = 0, j = 0;
  std::string diff;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j]) {
      ++i;
      ++j;
    } else {
      diff += b[j++];
    }
  }
  return diff;
}

std::string replace_all(std::string s, const std::string& what) {
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at)) s.erase(at, what.size());
  return s;
}

// LLaMA-Factory's placeholder test: {{name}} with a Python identifier inside.
bool has_placeholder(const std::string& slot) {
  for (size_t at = slot.find("{{"); at != std::string::npos; at = slot.find("{{", at + 1)) {
    size_t i = at + 2;
    auto word = [&](char c, bool first) {
      return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9');
    };
    if (i >= slot.size() || !word(slot[i], true)) continue;
    while (i < slot.size() && word(slot[i], false)) ++i;
    if (slot.compare(i, 2, "}}") == 0) return true;
  }
  return false;
}

jinja::Value message(const char* role, const char* content) {
  return jinja::Value::of(jinja::Dict{{"role", jinja::Value::of(std::string(role))},
                                      {"content", jinja::Value::of(std::string(content))}});
}

}  // namespace

TokenizerChatTemplate read_tokenizer_chat_template(const fs::path& dir) {
  TokenizerChatTemplate t;
  const fs::path config_file = dir / "tokenizer_config.json";
  ordered_json config = ordered_json::object();
  if (fs::is_regular_file(config_file)) {
    const std::string text = read_file(config_file);
    require_json_depth(text, config_file.string());
    try {
      config = ordered_json::parse(text);
    } catch (const ordered_json::parse_error& e) {
      throw Error(fmt::format("{}: malformed JSON: {}", config_file.string(), e.what()));
    }
    MT_REQUIRE(config.is_object(), "{}: expected a JSON object", config_file.string());
  }
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"})
    if (config.contains(key))
      if (const auto text = token_text(config[key])) t.special_tokens.emplace_back(key, jinja::Value::of(*text));

  if (const fs::path jinja_file = dir / "chat_template.jinja"; fs::is_regular_file(jinja_file)) {
    t.source = read_file(jinja_file);
    t.file = jinja_file.string();
    return t;
  }
  const auto found = config.find("chat_template");
  MT_REQUIRE(found != config.end() && !found->is_null(),
             "dataset.template jinja: the tokenizer in {} has no chat template (no chat_template.jinja and no "
             "chat_template in tokenizer_config.json); name a template instead", dir.string());
  t.file = config_file.string() + " (chat_template)";
  if (found->is_string()) {
    t.source = found->get<std::string>();
    return t;
  }
  MT_REQUIRE(found->is_array(), "{}: chat_template must be a string or a list of {{name, template}}", t.file);
  for (const auto& entry : *found) {
    if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
        entry["template"].is_string()) {
      t.source = entry["template"].get<std::string>();
      t.file = config_file.string() + " (chat_template 'default')";
      return t;
    }
  }
  throw Error(fmt::format("{}: a list of named chat templates without a 'default' one", t.file));
}

ChatTemplate chat_template_from_jinja(const TokenizerChatTemplate& source, const Tokenizer& tokenizer) {
  const jinja::Template compiled(source.source, source.file);
  auto render = [&](const char* probe, jinja::List messages, bool generation) {
    jinja::Dict vars = source.special_tokens;
    vars.emplace_back("messages", jinja::Value::of(std::move(messages)));
    vars.emplace_back("tools", jinja::Value::none());
    vars.emplace_back("documents", jinja::Value::none());
    vars.emplace_back("add_generation_prompt", jinja::Value::of(generation));
    try {
      return compiled.render(vars);
    } catch (const Error& e) {
      throw Error(fmt::format("dataset.template jinja: the chat template cannot render {} (as LLaMA-Factory's "
                              "parse_template renders it): {}", probe, e.what()));
    }
  };
  const std::vector<int32_t> empty = tokenizer.encode("", true);
  const std::string prefix = tokenizer.decode(empty);
  const size_t skip = code_point_count(prefix);

  const std::string system_slot = drop_code_points(
      render("a lone system message", {message("system", "{{content}}")}, false), skip);
  const std::string user_slot_empty_system = drop_code_points(
      render("an empty system message and a user message",
             {message("system", ""), message("user", "{{content}}")}, true), skip);
  std::string user_slot = drop_code_points(render("a user message", {message("user", "{{content}}")}, true), skip);
  std::string assistant_slot = drop_code_points(
      render("a user and an assistant message", {message("user", "{{content}}"), message("assistant", "{{content}}")},
             false),
      skip + code_point_count(user_slot));

  ChatTemplate t;
  t.name = "jinja";
  t.empty_thought = assistant_slot.find("<think>") != std::string::npos;
  assistant_slot = replace_all(replace_all(assistant_slot, "<think>"), "</think>");
  assistant_slot.erase(0, assistant_slot.find_first_not_of('\n') == std::string::npos
                              ? assistant_slot.size() : assistant_slot.find_first_not_of('\n'));
  if (code_point_count(user_slot) > code_point_count(user_slot_empty_system)) {
    t.default_system = find_diff(user_slot_empty_system, user_slot);
    std::string sole_system = system_slot;
    if (const size_t at = sole_system.find("{{content}}"); at != std::string::npos)
      sole_system.replace(at, 11, t.default_system);
    user_slot = drop_code_points(user_slot, code_point_count(sole_system));
  }
  // LLaMA-Factory's formatters refuse a slot without its placeholder (user, assistant, system, in that order) and a
  // prefix with one.
  using Named = std::pair<const char*, const std::string*>;
  for (const auto& [role, slot] : {Named{"user", &user_slot}, Named{"assistant", &assistant_slot},
                                   Named{"system", &system_slot}})
    MT_REQUIRE(has_placeholder(*slot),
               "dataset.template jinja: {}: the {} slot cut out of the chat template has no {{{{content}}}} (\"{}\"), so "
               "LLaMA-Factory's parse_template refuses this template too: A placeholder is required in the string "
               "formatter. Name a template instead",
               source.file, role, *slot);
  MT_REQUIRE(!has_placeholder(prefix), "dataset.template jinja: {}: the tokenizer's empty encoding \"{}\" holds a "
             "placeholder", source.file, prefix);
  auto slots = [](const std::string& text) { return Slots{Slot{Slot::Kind::text, text}}; };
  if (!prefix.empty()) t.prefix = slots(prefix);
  t.system = slots(system_slot);
  t.user = slots(user_slot);
  t.assistant = slots(assistant_slot);
  t.function = slots(assistant_slot);
  t.observation = slots(user_slot);
  t.tool_format = ToolFormat::generic;
  return t;
}

}  // namespace mt
