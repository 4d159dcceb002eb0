// What makes an exported model directory chat and stop as it was trained, as LLaMA-Factory's export leaves it: the
// training chat template as a Jinja `chat_template` in tokenizer_config.json (LLaMA-Factory's _get_jinja_template,
// Llama2-style templates with the system text in the first user turn), the EOS the template trains (its first stop
// word where it replaces the EOS) and a pad token (the EOS where there is none) there too, and generation_config.json
// whose eos_token_id lists the EOS and every stop word.
// Invariant: the Jinja renders, for a conversation of system / user / assistant turns, exactly the text of the
// template's slots (bos / eos slots as their token text); other keys of the two files are kept as they were.
#pragma once
#include <filesystem>
#include <string>

#include "data/templates/chat_template.h"

namespace mt {

class Tokenizer;

std::string jinja_chat_template(const ChatTemplate& chat_template, const Tokenizer& tokenizer);

// Rewrites dir/tokenizer_config.json and dir/generation_config.json (each through a temporary file and a rename);
// a template token the tokenizer lacks raises mt::Error naming it.
void write_inference_files(const std::filesystem::path& dir, const ChatTemplate& chat_template,
                           const Tokenizer& tokenizer);

}  // namespace mt
