// TemplateRenderer: a Conversation -> token ids, one (prompt, response) pair per turn pair (LLaMA-Factory's
// Template.encode_multiturn). Invariant: every text slot is encoded on its own, without added special tokens; each
// response ends with the template's end-of-turn text or EOS (the `empty` template has none, as in LLaMA-Factory).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/formats/conversation.h"
#include "data/templates/chat_template.h"
#include "data/tokenizer.h"

namespace mt {

struct EncodedPair {
  std::vector<int32_t> prompt;
  std::vector<int32_t> response;
};

class TemplateRenderer {
 public:
  // Checks that the tokenizer has every token the template needs (stop words, EOS) and raises mt::Error naming the
  // template and the token otherwise (LLaMA-Factory would add them to the vocabulary; we never resize a model).
  TemplateRenderer(const ChatTemplate& chat_template, const Tokenizer& tokenizer);

  // Malformed tools or function-call JSON raise mt::Error.
  std::vector<EncodedPair> encode(const Conversation& conversation) const;
  const ChatTemplate& chat_template() const { return template_; }

 private:
  void append(std::vector<int32_t>& ids, const Slots& slots, const std::string& content) const;
  std::string function_text(const std::string& content) const;

  ChatTemplate template_;
  const Tokenizer& tokenizer_;
  std::optional<int32_t> bos_id_;
  std::optional<int32_t> eos_id_;
  std::vector<int32_t> thought_ids_;   // encode(kThoughtOpen + kThoughtClose), for empty_thought templates
};

}  // namespace mt
