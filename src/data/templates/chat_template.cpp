// The template table (LLaMA-Factory's definitions of the same names) and the `template: auto` rule.
// Invariant: slot texts are copied character for character from LLaMA-Factory's formats; defaults it fills in
// (assistant = content + EOS, or content alone with efficient_eos; system = content; observation = user;
// function = assistant slots) are spelled out here.
#include "data/templates/chat_template.h"

#include <algorithm>

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

  ChatTemplate llama4 = llama3;  // Llama 4: llama3's turns under its own header and end-of-turn tokens
  llama4.name = "llama4";
  llama4.user = {text("<|header_start|>user<|header_end|>\n\n{{content}}<|eot|><|header_start|>assistant<|header_end|>\n\n")};
  llama4.assistant = llama4.function = {text("{{content}}<|eot|>")};
  llama4.system = {text("<|header_start|>system<|header_end|>\n\n{{content}}<|eot|>")};
  llama4.observation = {text("<|header_start|>ipython<|header_end|>\n\n{{content}}<|eot|>"
                             "<|header_start|>assistant<|header_end|>\n\n")};
  llama4.stop_words = {"<|eot|>", "<|eom|>"};
  all.push_back(llama4);

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

  // Qwen 3.5: Qwen 3's turns with XML-style tool calls; _nothink is the same without the reasoning template.
  ChatTemplate qwen3_5 = qwen3;
  qwen3_5.name = "qwen3_5";
  qwen3_5.tool_format = ToolFormat::qwen3_5;
  all.push_back(qwen3_5);
  ChatTemplate qwen3_5_nothink = qwen3_5;
  qwen3_5_nothink.name = "qwen3_5_nothink";
  qwen3_5_nothink.empty_thought = false;
  all.push_back(qwen3_5_nothink);

  ChatTemplate qwen3_nothink = qwen;  // Qwen3's template without the ReasoningTemplate's empty thought
  qwen3_nothink.name = "qwen3_nothink";
  qwen3_nothink.default_system = "";
  all.push_back(qwen3_nothink);

  ChatTemplate yi = chatml_like("yi", "");  // chatml's turns, no observation turn of its own, EOS kept
  yi.observation = yi.user;
  yi.stop_words = {"<|im_end|>"};
  yi.replace_eos = false;
  all.push_back(yi);

  ChatTemplate deepseek;
  deepseek.name = "deepseek";
  deepseek.prefix = {kBos};
  deepseek.user = {text("User: {{content}}\n\nAssistant:")};
  deepseek.assistant = deepseek.function = {text("{{content}}"), kEos};
  deepseek.system = {text("{{content}}\n\n")};
  deepseek.observation = deepseek.user;
  all.push_back(deepseek);

  ChatTemplate deepseekr1;  // deepseek3's turns in a ReasoningTemplate
  deepseekr1.name = "deepseekr1";
  deepseekr1.prefix = {kBos};
  deepseekr1.user = {text("<｜User｜>{{content}}<｜Assistant｜>")};
  deepseekr1.assistant = deepseekr1.function = {text("{{content}}"), kEos};
  deepseekr1.system = kContent;
  deepseekr1.observation = deepseekr1.user;
  deepseekr1.empty_thought = true;
  all.push_back(deepseekr1);

  ChatTemplate deepseekcoder;
  deepseekcoder.name = "deepseekcoder";
  deepseekcoder.prefix = {kBos};
  deepseekcoder.user = {text("### Instruction:\n{{content}}\n### Response:")};
  deepseekcoder.assistant = deepseekcoder.function = {text("\n{{content}}\n<|EOT|>\n")};
  deepseekcoder.system = kContent;
  deepseekcoder.observation = deepseekcoder.user;
  deepseekcoder.default_system =
      "You are an AI programming assistant, utilizing the DeepSeek Coder model, developed by DeepSeek Company, and "
      "you only answer questions related to computer science. For politically sensitive questions, security and "
      "privacy issues, and other non-computer science questions, you will refuse to answer.\n";
  all.push_back(deepseekcoder);

  // Gemma: no system turn (Llama2Template: the system text opens the first user message).
  ChatTemplate gemma;
  gemma.name = "gemma";
  gemma.prefix = {kBos};
  gemma.user = {text("<start_of_turn>user\n{{content}}<end_of_turn>\n<start_of_turn>model\n")};
  gemma.assistant = gemma.function = {text("{{content}}<end_of_turn>\n")};
  gemma.system = {text("{{content}}\n\n")};
  gemma.observation = {text("<start_of_turn>tool\n{{content}}<end_of_turn>\n<start_of_turn>model\n")};
  gemma.stop_words = {"<end_of_turn>"};
  gemma.replace_eos = true;
  gemma.llama2_style = true;
  all.push_back(gemma);

  ChatTemplate gemma2 = gemma;
  gemma2.name = "gemma2";
  gemma2.stop_words = {"<eos>", "<end_of_turn>"};
  gemma2.replace_eos = false;
  gemma2.efficient_eos = true;
  all.push_back(gemma2);

  ChatTemplate gemma3 = gemma;   // its image plugin leaves text alone
  gemma3.name = "gemma3";
  all.push_back(gemma3);

  ChatTemplate phi;
  phi.name = "phi";
  phi.user = {text("<|user|>\n{{content}}<|end|>\n<|assistant|>\n")};
  phi.assistant = phi.function = {text("{{content}}<|end|>\n")};
  phi.system = {text("<|system|>\n{{content}}<|end|>\n")};
  phi.observation = phi.user;
  phi.stop_words = {"<|end|>"};
  phi.replace_eos = true;
  all.push_back(phi);

  ChatTemplate phi4;
  phi4.name = "phi4";
  phi4.user = {text("<|im_start|>user<|im_sep|>{{content}}<|im_end|><|im_start|>assistant<|im_sep|>")};
  phi4.assistant = phi4.function = {text("{{content}}<|im_end|>")};
  phi4.system = {text("<|im_start|>system<|im_sep|>{{content}}<|im_end|>")};
  phi4.observation = phi4.user;
  phi4.stop_words = {"<|im_end|>"};
  phi4.replace_eos = true;
  all.push_back(phi4);

  ChatTemplate phi4_mini;
  phi4_mini.name = "phi4_mini";
  phi4_mini.user = {text("<|user|>{{content}}<|end|><|assistant|>")};
  phi4_mini.assistant = phi4_mini.function = {text("{{content}}<|end|>")};
  phi4_mini.system = {text("<|system|>{{content}}<|end|>")};
  phi4_mini.observation = phi4_mini.user;
  phi4_mini.tools_slot = "<|tool|>{{content}}<|/tool|>";
  phi4_mini.stop_words = {"<|end|>"};
  phi4_mini.replace_eos = true;
  all.push_back(phi4_mini);

  ChatTemplate glm4;
  glm4.name = "glm4";
  glm4.prefix = {text("[gMASK]<sop>")};
  glm4.user = {text("<|user|>\n{{content}}<|assistant|>")};
  glm4.assistant = {text("\n{{content}}")};
  glm4.system = {text("<|system|>\n{{content}}")};
  glm4.function = kContent;
  glm4.observation = {text("<|observation|>\n{{content}}<|assistant|>")};
  glm4.tool_format = ToolFormat::glm4;
  glm4.stop_words = {"<|user|>", "<|observation|>"};
  glm4.efficient_eos = true;
  all.push_back(glm4);

  ChatTemplate glm4_moe = glm4;  // GLM-4.5: GLM-4's turns, a reasoning template, its own tool format
  glm4_moe.name = "glm4_moe";
  glm4_moe.tool_format = ToolFormat::glm4_moe;
  glm4_moe.empty_thought = true;
  all.push_back(glm4_moe);

  ChatTemplate intern2;
  intern2.name = "intern2";
  intern2.prefix = {kBos};
  intern2.user = {text("<|im_start|>user\n{{content}}<|im_end|>\n<|im_start|>assistant\n")};
  intern2.assistant = intern2.function = {text("{{content}}<|im_end|>\n")};
  intern2.system = {text("<|im_start|>system\n{{content}}<|im_end|>\n")};
  intern2.observation = intern2.user;
  intern2.default_system =
      "You are an AI assistant whose name is InternLM (书生·浦语).\n"
      "- InternLM (书生·浦语) is a conversational language model that is developed by Shanghai AI Laboratory "
      "(上海人工智能实验室). It is designed to be helpful, honest, and harmless.\n"
      "- InternLM (书生·浦语) can understand and communicate fluently in the language "
      "chosen by the user such as English and 中文.";
  intern2.stop_words = {"<|im_end|>"};
  all.push_back(intern2);

  // GPT-OSS's harmony format: a reasoning template whose thought words are the analysis channel and the switch to
  // the final channel; LLaMA-Factory's defaults for the rest (function = content, observation = user).
  ChatTemplate gpt_oss;
  gpt_oss.name = "gpt_oss";
  gpt_oss.user = gpt_oss.observation = {text("<|start|>user<|message|>{{content}}<|end|><|start|>assistant")};
  gpt_oss.assistant = gpt_oss.function = kContent;
  gpt_oss.system = {text("<|start|>system<|message|>{{content}}<|end|>")};
  gpt_oss.default_system = "You are ChatGPT, a large language model trained by OpenAI.";
  gpt_oss.efficient_eos = true;
  gpt_oss.empty_thought = true;
  gpt_oss.thought_open = "<|channel|>analysis<|message|>";
  gpt_oss.thought_close = "<|end|><|start|>assistant<|channel|>final<|message|>";
  all.push_back(gpt_oss);

  // Dropped from LLaMA-Factory 0.9.5; its last published definition (before commit 5cccaeec8).
  ChatTemplate baichuan2;
  baichuan2.name = "baichuan2";
  baichuan2.user = baichuan2.observation = {text("<reserved_106>{{content}}<reserved_107>")};
  baichuan2.assistant = baichuan2.function = baichuan2.system = kContent;
  baichuan2.efficient_eos = true;
  all.push_back(baichuan2);

  std::sort(all.begin(), all.end(), [](const ChatTemplate& a, const ChatTemplate& b) { return a.name < b.name; });
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
  throw Error(fmt::format("dataset.template: unknown template '{}'; known: auto, jinja, {}", name,
                          fmt::join(chat_template_names(), ", ")));
}

std::vector<std::string> chat_template_names() {
  std::vector<std::string> names;
  for (const ChatTemplate& t : templates()) names.push_back(t.name);
  return names;
}

std::string auto_template_name(const std::string& model_family, const Tokenizer& tokenizer) {
  auto has = [&](const char* token) { return tokenizer.token_to_id(token).has_value(); };
  auto bos_is = [&](const char* token) {
    const auto bos = tokenizer.bos_id();
    return bos && tokenizer.token_to_id(token) == bos;
  };
  if (model_family == "qwen2") return "qwen";
  if (model_family == "qwen3") return "qwen3";
  if (model_family == "qwen3_5" || model_family == "qwen3_5_text" || model_family == "qwen3_5_moe" ||
      model_family == "qwen3_5_moe_text")
    return "qwen3_5";
  if (model_family == "mistral") return "mistral";
  if (model_family == "gemma2") return "gemma2";
  if (model_family == "gemma3") return "gemma3";
  if (model_family == "gemma3_text") return "gemma2";  // the text-only 270M and 1B, as LLaMA-Factory registers them
  if (model_family == "glm4") return "glm4";
  if (model_family == "glm4_moe") return "glm4_moe";
  if (model_family == "gpt_oss") return "gpt_oss";
  if (model_family == "qwen3_moe") return "qwen3";
  if (model_family == "qwen2_moe") return "qwen";
  if (model_family == "mixtral") return "mistral";
  if (model_family == "llama4" || model_family == "llama4_text") return "llama4";
  if (model_family == "internlm2") return "intern2";
  if (model_family == "baichuan") return "baichuan2";
  if (model_family == "llama") {
    if (has("<|begin_of_text|>")) return "llama3";
    if (bos_is("<s>")) return "llama2";
  }
  if (model_family == "phi3") {
    if (has("<|im_start|>") && has("<|im_sep|>")) return "phi4";
    if (has("<|user|>") && has("<|assistant|>") && has("<|end|>")) {
      if (bos_is("<s>")) return "phi";
      if (bos_is("<|endoftext|>")) return "phi4_mini";
    }
  }
  throw Error(fmt::format("dataset.template: auto cannot tell the chat template of this {} model from its tokenizer; "
                          "set dataset.template to one of {}",
                          model_family, fmt::join(chat_template_names(), ", ")));
}

}  // namespace mt
