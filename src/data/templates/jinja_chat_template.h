// `template: jinja`: the tokenizer's own chat template, used for training as LLaMA-Factory 0.9.5 uses it when no
// template is named (template.py's parse_template): the Jinja is rendered for four probe conversations with
// "{{content}}" as every message, and the per-role slots (prefix, system, user, assistant) and default system text
// are cut out of the results; training then encodes message by message with those slots, as for a named template.
// Limits, LLaMA-Factory's own: whatever the Jinja does beyond one fixed text per role is not trained as rendered —
// history rewriting (Qwen3 drops earlier turns' thoughts), date or tool headers (Llama 3.1), a system text merged
// into the first user turn (Gemma 3: dropped), a template that refuses a lone system message (Gemma 2: an error);
// tools and function calls use LLaMA-Factory's default tool format, not the template's.
// Invariant: the slots are exactly LLaMA-Factory's for the same template and tokenizer (code-point slicing, its
// find_diff); a template whose probes fail is refused with one line naming the file and the probe.
#pragma once
#include <filesystem>
#include <string>

#include "data/templates/chat_template.h"
#include "data/templates/jinja/value.h"

namespace mt {

class Tokenizer;

struct TokenizerChatTemplate {
  std::string source;
  std::string file;             // where it was read (for errors)
  jinja::Dict special_tokens;   // transformers' special_tokens_map: bos/eos/unk/sep/pad/cls/mask_token that are set
};

// dir/chat_template.jinja when present (transformers 5 saves it there), else tokenizer_config.json's chat_template
// (a string, or the "default" entry of a list of named templates), with the special tokens of tokenizer_config.json.
// No chat template raises mt::Error naming the directory.
TokenizerChatTemplate read_tokenizer_chat_template(const std::filesystem::path& dir);

// LLaMA-Factory's parse_template: the template named "jinja" (empty_thought when the assistant slot has <think>).
ChatTemplate chat_template_from_jinja(const TokenizerChatTemplate& chat_template, const Tokenizer& tokenizer);

}  // namespace mt
