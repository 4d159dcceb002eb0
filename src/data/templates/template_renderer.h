// TemplateRenderer: a Conversation -> token ids, one (prompt, response) pair per turn pair (LLaMA-Factory's
// Template.encode_multiturn). Invariant: every text slot is encoded on its own, without added special tokens; each
// response ends with the template's end-of-turn text or EOS (the `empty` template has none, and an efficient_eos
// template's EOS is added by assemble_example, as in LLaMA-Factory).
#pragma once
#include <cstdint>
#include <memory>
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
  // Encodes as LLaMA-Factory's fix_special_tokens leaves the tokenizer: the stop words it re-adds (all but an EOS
  // the tokenizer already has) lose their lstrip / rstrip / single_word (Tokenizer::with_plain_special_tokens).
  TemplateRenderer(const ChatTemplate& chat_template, const Tokenizer& tokenizer);

  // Malformed tools or function-call JSON raise mt::Error.
  std::vector<EncodedPair> encode(const Conversation& conversation) const;
  const ChatTemplate& chat_template() const { return template_; }
  // The EOS id that ends every example of an efficient_eos template (assemble_example's efficient_eos); else none.
  std::optional<int32_t> efficient_eos() const { return template_.efficient_eos ? eos_id_ : std::nullopt; }

 private:
  void append(std::vector<int32_t>& ids, const Slots& slots, const std::string& content) const;
  std::string function_text(const std::string& content) const;

  ChatTemplate template_;
  std::shared_ptr<const Tokenizer> own_tokenizer_;   // the tokenizer with plain stop words, when there are any
  const Tokenizer* tokenizer_;                        // own_tokenizer_, or the one given
  std::optional<int32_t> bos_id_;
  std::optional<int32_t> eos_id_;
  std::vector<int32_t> thought_ids_;   // encode(thought_open + thought_close), for empty_thought templates
};

}  // namespace mt
