// The template table (LLaMA-Factory's definitions of the same names) and the `template: auto` rule.
// Invariant: slot texts are copied character for character from LLaMA-Factory's formats; defaults it fills in
// (assistant = content + EOS, system = observation = user, function = assistant slots) are spelled out here.
#include "data/templates/chat_template.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "data/tokenizer.h"

namespace mt {
namespace {

Slot text(std::string s) { return {Slot::Kind::text, std::move(s)}; }
const Slot kBos{Slot::Kind::bos, ""};
const Slot kEos{Slot::Kind::eos, ""};
const Slots kContent = {text("{{content}}")};

ChatTemplate chatml_like(std::string name, std::string default_system) {
  ChatTemplate t;
  t.name = std::move(name);
  t.user = {text("<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n")};
  t.assistant = {text("{{content}}<|im_end|>\n")};
  t.system = {text("<|im_start|>system\n{{content}}<|im_end|>\n")};
  t.function = t.assistant;
  t.default_system = std::move(default_system);
  t.replace_eos = true;
  return t;
}

std::vector<ChatTemplate> make_templates() {
  std::vector<ChatTemplate> all;

  ChatTemplate chatml = chatml_like("chatml", "");
  chatml.observation = {text("<|im_start|>tool\n{{content}}<|im_end|>\n<|im_start|>assistant\n")};
  chatml.stop_words = {"<|im_end|>", "<|im_start|>"};
  all.push_back(chatml);

  ChatTemplate def;
  def.name = "default";
  def.user = {text("Human: {{content}}"), kEos, text("\nAssistant:")};
  def.assistant = {text("{{content}}"), kEos, text("\n")};
  def.system = {text("System: {{content}}"), kEos, text("\n")};
  def.function = def.assistant;
  def.observation = def.user;
  all.push_back(def);

  ChatTemplate empty;
  empty.name = "empty";
  empty.user = empty.system = empty.observation = empty.assistant = empty.function = kContent;
  all.push_back(empty);

  ChatTemplate llama2;
  llama2.name = "llama2";
  llama2.user = {kBos, text("[INST] {{content}} [/INST]")};
  llama2.system = {text("<<SYS>>\n{{content}}\n<</SYS>>\n\n")};
  llama2.assistant = llama2.function = {text("{{content}}"), kEos};
  llama2.observation = llama2.user;
  llama2.llama2_style = true;
  all.push_back(llama2);

  ChatTemplate llama3;
  llama3.name = "llama3";
  llama3.prefix = {kBos};
  llama3.user = {text("<|start_header_id|>user<|end_header_id|>\n\n{{content}}<|eot_id|>"
                      "<|start_header_id|>assistant<|end_header_id|>\n\n")};
  llama3.assistant = llama3.function = {text("{{content}}<|eot_id|>")};
  llama3.system = {text("<|start_header_id|>system<|end_header_id|>\n\n{{content}}<|eot_id|>")};
  llama3.observation = {text("<|start_header_id|>ipython<|end_header_id|>\n\n{{content}}<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\n")};
  llama3.tool_format = ToolFormat::llama3;
  llama3.stop_words = {"<|eot_id|>", "<|eom_id|>"};
  llama3.replace_eos = true;
  all.push_back(llama3);

  ChatTemplate mistral;
  mistral.name = "mistral";
  mistral.prefix = {kBos};
  mistral.user = {text("[INST] {{content}}[/INST]")};
  mistral.assistant = {text(" {{content}}"), kEos};
  mistral.system = {text("{{content}}\n\n")};
  mistral.function = {text("[TOOL_CALLS] {{content}}"), kEos};
  mistral.observation = {text("[TOOL_RESULTS] {\"content\": {{content}}}[/TOOL_RESULTS]")};
  mistral.tool_format = ToolFormat::mistral;
  mistral.llama2_style = true;
  all.push_back(mistral);

  ChatTemplate qwen = chatml_like("qwen", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  qwen.observation = {text("<|im_start|>user\n<tool_response>\n{{content}}\n</tool_response><|im_end|>\n"
                           "<|im_start|>assistant\n")};
  qwen.tool_format = ToolFormat::qwen;
  qwen.stop_words = {"<|im_end|>"};
  all.push_back(qwen);

  ChatTemplate qwen3 = qwen;
  qwen3.name = "qwen3";
  qwen3.default_system = "";
  qwen3.empty_thought = true;
  all.push_back(qwen3);
  return all;
}

const std::vector<ChatTemplate>& templates() {
  static const std::vector<ChatTemplate> all = make_templates();
  return all;
}

}  // namespace

const ChatTemplate& find_chat_template(const std::string& name) {
  for (const ChatTemplate& t : templates())
    if (t.name == name) return t;
  throw Error(fmt::format("dataset.template: unknown template '{}'; known: auto, {}", name,
                          fmt::join(chat_template_names(), ", ")));
}

std::vector<std::string> chat_template_names() {
  std::vector<std::string> names;
  for (const ChatTemplate& t : templates()) names.push_back(t.name);
  return names;
}

std::string auto_template_name(const std::string& model_family, const Tokenizer& tokenizer) {
  if (model_family == "qwen2") return "qwen";
  if (model_family == "qwen3") return "qwen3";
  if (model_family == "mistral") return "mistral";
  if (model_family == "llama") {
    if (tokenizer.token_to_id("<|begin_of_text|>")) return "llama3";
    const auto bos = tokenizer.bos_id();
    if (bos && tokenizer.token_to_id("<s>") == bos) return "llama2";
  }
  throw Error(fmt::format("dataset.template: auto cannot tell the chat template of this {} model from its tokenizer; "
                          "set dataset.template to one of {}",
                          model_family, fmt::join(chat_template_names(), ", ")));
}

}  // namespace mt
