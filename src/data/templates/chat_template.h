// Chat templates by name, as LLaMA-Factory 0.9.5's register_template defines them, and the `template: auto` rule.
// Invariant: each template renders exactly what LLaMA-Factory's template of the same name renders.
#pragma once
#include <string>
#include <vector>

namespace mt {

class Tokenizer;

// One piece of a message: literal text ("{{content}}" is replaced by the message), or the BOS / EOS token id.
struct Slot {
  enum class Kind { text, bos, eos };
  Kind kind = Kind::text;
  std::string text;
};
using Slots = std::vector<Slot>;

// How tool descriptions (system side) and function calls (assistant side) are written; LLaMA-Factory's tool_format.
enum class ToolFormat { generic, qwen, llama3, mistral, glm4, glm4_moe, qwen3_5 };

struct ChatTemplate {
  std::string name;
  Slots prefix, system, user, assistant, function, observation;
  ToolFormat tool_format = ToolFormat::generic;
  std::string tools_slot;                // non-empty: the tools JSON goes in as given, at its "{{content}}", instead
                                         // of tool_format's description (a StringFormatter format_tools)
  std::string default_system;
  std::vector<std::string> stop_words;   // those written in slots (and the EOS) must be tokens of the tokenizer
  bool replace_eos = false;              // stop_words[0] is the EOS token (LLaMA-Factory's replace_eos)
  bool efficient_eos = false;            // no EOS after each answer: the next prompt's first token is trained to be
                                         // the EOS and one EOS ends the example (see assemble_example)
  bool llama2_style = false;             // Llama2Template: system text inside the first user message, and
                                         // function calls formatted whole (no thought / <tool_call> handling)
  bool empty_thought = false;            // ReasoningTemplate: answers without a thought get thought_open+thought_close
  // LLaMA-Factory's thought_words: its default, or the template's own (gpt_oss: the harmony analysis channel).
  std::string thought_open = "<think>\n", thought_close = "\n</think>\n\n";
};

// The template `name`; an unknown name raises mt::Error listing the known ones.
const ChatTemplate& find_chat_template(const std::string& name);
std::vector<std::string> chat_template_names();

// `template: auto`, by model family (and, where one family has several templates, the tokenizer's tokens):
//   qwen2 -> qwen, qwen3 -> qwen3, mistral -> mistral, gemma2 -> gemma2, gemma3 -> gemma3, gemma3_text -> gemma2, glm4 -> glm4,
//   gpt_oss -> gpt_oss,
//   internlm2 -> intern2, baichuan -> baichuan2;
//   llama -> llama3 when the tokenizer has <|begin_of_text|>, llama2 when its BOS is <s>;
//   phi3 -> phi4 when the tokenizer has <|im_start|> and <|im_sep|> (Phi-4), else, when it has <|user|>,
//   <|assistant|> and <|end|>: phi when its BOS is <s> (Phi-3, Phi-3.5), phi4_mini when its BOS is <|endoftext|>
//   (Phi-4-mini).
// Anything else raises mt::Error asking for dataset.template.
std::string auto_template_name(const std::string& model_family, const Tokenizer& tokenizer);

}  // namespace mt
