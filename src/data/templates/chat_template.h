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
enum class ToolFormat { generic, qwen, llama3, mistral };

struct ChatTemplate {
  std::string name;
  Slots prefix, system, user, assistant, function, observation;
  ToolFormat tool_format = ToolFormat::generic;
  std::string default_system;
  std::vector<std::string> stop_words;   // those written in slots (and the EOS) must be tokens of the tokenizer
  bool replace_eos = false;              // stop_words[0] is the EOS token (LLaMA-Factory's replace_eos)
  bool llama2_style = false;             // Llama2Template: system text inside the first user message, and
                                         // function calls formatted whole (no thought / <tool_call> handling)
  bool empty_thought = false;            // ReasoningTemplate: answers without a thought get kThoughtOpen+kThoughtClose
};

// LLaMA-Factory's default thought words (every template here uses them).
inline constexpr const char* kThoughtOpen = "<think>\n";
inline constexpr const char* kThoughtClose = "\n</think>\n\n";

// The template `name`; an unknown name raises mt::Error listing the known ones.
const ChatTemplate& find_chat_template(const std::string& name);
std::vector<std::string> chat_template_names();

// `template: auto`: qwen2 -> qwen, qwen3 -> qwen3, mistral -> mistral, llama -> llama3 when the tokenizer has
// <|begin_of_text|>, llama2 when its BOS is <s>. Anything else raises mt::Error asking for dataset.template.
std::string auto_template_name(const std::string& model_family, const Tokenizer& tokenizer);

}  // namespace mt
