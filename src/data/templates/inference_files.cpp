// jinja_chat_template and write_inference_files (see inference_files.h).
#include "data/templates/inference_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "core/error.h"
#include "data/tokenizer.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

std::string token_text(const Tokenizer& tokenizer, std::optional<int32_t> id) {
  return id ? tokenizer.decode(std::vector<int32_t>{*id}, false) : std::string();
}

// A Jinja string literal: quotes and backslashes escaped.
std::string literal(const std::string& text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

// The slots as one Jinja expression: literals, the placeholder variable for {{content}}, bos / eos token text.
std::string slots_expression(const Slots& slots, const Tokenizer& tokenizer, const std::string& eos,
                             const std::string& placeholder = "content") {
  std::vector<std::string> items;
  for (const Slot& slot : slots) {
    if (slot.kind == Slot::Kind::bos) {
      if (tokenizer.bos_id()) items.push_back(literal(token_text(tokenizer, tokenizer.bos_id())));
    } else if (slot.kind == Slot::Kind::eos) {
      if (!eos.empty()) items.push_back(literal(eos));
    } else {
      const size_t at = slot.text.find("{{content}}");
      const std::string before = slot.text.substr(0, at);
      if (!before.empty()) items.push_back(literal(before));
      if (at != std::string::npos) {
        items.push_back(placeholder);
        const std::string after = slot.text.substr(at + 11);
        if (!after.empty()) items.push_back(literal(after));
      }
    }
  }
  std::string joined;
  for (const std::string& item : items) joined += (joined.empty() ? "" : " + ") + item;
  return joined;
}

// The EOS text the template trains: its first stop word where it replaces the EOS, else the tokenizer's.
std::string trained_eos(const ChatTemplate& t, const Tokenizer& tokenizer) {
  if (t.replace_eos && !t.stop_words.empty()) return t.stop_words[0];
  return token_text(tokenizer, tokenizer.eos_id());
}

ordered_json read_json_object(const fs::path& file) {
  if (!fs::is_regular_file(file)) return ordered_json::object();
  std::ifstream in(file);
  try {
    ordered_json j = ordered_json::parse(in);
    MT_REQUIRE(j.is_object(), "{}: expected a JSON object", file.string());
    return j;
  } catch (const ordered_json::parse_error& e) {
    throw Error(fmt::format("{}: malformed JSON: {}", file.string(), e.what()));
  }
}

void replace_file(const fs::path& file, const std::string& text) {
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    MT_REQUIRE(out.good(), "{}: cannot write", tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  MT_REQUIRE(!ec, "{}: cannot rename into place: {}", file.string(), ec.message());
}

}  // namespace

std::string jinja_chat_template(const ChatTemplate& t, const Tokenizer& tokenizer) {
  const std::string eos = trained_eos(t, tokenizer);
  const std::string prefix = slots_expression(t.prefix, tokenizer, eos);
  const std::string system = slots_expression(t.system, tokenizer, eos, "system_message");
  const std::string user = slots_expression(t.user, tokenizer, eos);
  const std::string assistant = slots_expression(t.assistant, tokenizer, eos);
  std::string jinja;
  if (!prefix.empty()) jinja += "{{ " + prefix + " }}";
  if (!t.default_system.empty()) jinja += "{% set system_message = " + literal(t.default_system) + " %}";
  jinja += "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
           "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% endif %}";
  if (t.llama2_style) {
    jinja += "{% for message in loop_messages %}"
             "{% if loop.index0 == 0 and system_message is defined %}"
             "{% set content = " + system + " + message['content'] %}"
             "{% else %}{% set content = message['content'] %}{% endif %}";
  } else {
    jinja += "{% if system_message is defined %}{{ " + system + " }}{% endif %}"
             "{% for message in loop_messages %}{% set content = message['content'] %}";
  }
  jinja += "{% if message['role'] == 'user' %}{{ " + user + " }}"
           "{% elif message['role'] == 'assistant' %}{{ " + assistant + " }}{% endif %}{% endfor %}";
  return jinja;
}

void write_inference_files(const fs::path& dir, const ChatTemplate& t, const Tokenizer& tokenizer) {
  const std::string eos = trained_eos(t, tokenizer);
  const std::optional<int32_t> eos_id = tokenizer.token_to_id(eos);
  MT_REQUIRE(eos_id.has_value(), "export {}: the chat template '{}' ends answers with '{}', which the tokenizer lacks",
             dir.string(), t.name, eos);
  ordered_json config = read_json_object(dir / "tokenizer_config.json");
  config["chat_template"] = jinja_chat_template(t, tokenizer);
  config["eos_token"] = eos;
  const std::optional<int32_t> pad = tokenizer.pad_id();
  const std::string pad_text = pad ? token_text(tokenizer, pad) : eos;
  config["pad_token"] = pad_text;
  replace_file(dir / "tokenizer_config.json", config.dump(2) + "\n");

  ordered_json generation = read_json_object(dir / "generation_config.json");
  std::vector<int32_t> stops = {*eos_id};
  for (const std::string& word : t.stop_words) {
    const std::optional<int32_t> id = tokenizer.token_to_id(word);
    MT_REQUIRE(id.has_value(), "export {}: stop word '{}' of the chat template '{}' is not a token of the tokenizer",
               dir.string(), word, t.name);
    if (std::find(stops.begin(), stops.end(), *id) == stops.end()) stops.push_back(*id);
  }
  generation["eos_token_id"] = stops.size() == 1 ? ordered_json(stops[0]) : ordered_json(stops);
  generation["pad_token_id"] = *tokenizer.token_to_id(pad_text);
  if (tokenizer.bos_id()) generation["bos_token_id"] = *tokenizer.bos_id();
  replace_file(dir / "generation_config.json", generation.dump(2) + "\n");
}

}  // namespace mt
