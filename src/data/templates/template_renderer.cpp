// Message-by-message encoding of a Conversation (LLaMA-Factory's Template._encode, Llama2Template._encode and
// ReasoningTemplate.encode_multiturn with enable_thinking=True, its default).
// Invariant: text slots are encoded one at a time, so token boundaries match LLaMA-Factory's at every slot edge.
#include "data/templates/template_renderer.h"

#include <string_view>
#include <utility>

#include "core/error.h"
#include "data/templates/tool_format.h"

namespace mt {
namespace {

bool uses_eos(const ChatTemplate& t) {
  for (const Slots* slots : {&t.prefix, &t.system, &t.user, &t.assistant, &t.function, &t.observation})
    for (const Slot& s : *slots)
      if (s.kind == Slot::Kind::eos) return true;
  return false;
}

bool writes(const ChatTemplate& t, const std::string& word) {
  for (const Slots* slots : {&t.prefix, &t.system, &t.user, &t.assistant, &t.function, &t.observation})
    for (const Slot& s : *slots)
      if (s.text.find(word) != std::string::npos) return true;
  return false;
}

// LLaMA-Factory's StringFormatter: the first "{{content}}" of a text slot becomes `content`.
std::string fill(const std::string& slot, const std::string& content) {
  std::string out = slot;
  if (const size_t at = out.find("{{content}}"); at != std::string::npos) out.replace(at, 11, content);
  return out;
}

// Python's str.strip() of ASCII whitespace (how LLaMA-Factory compares thought words).
std::string stripped(const std::string& s) {
  const char* space = " \t\n\r\f\v";
  const size_t begin = s.find_first_not_of(space);
  return begin == std::string::npos ? "" : s.substr(begin, s.find_last_not_of(space) - begin + 1);
}

}  // namespace

TemplateRenderer::TemplateRenderer(const ChatTemplate& chat_template, const Tokenizer& tokenizer)
    : template_(chat_template), tokenizer_(&tokenizer), bos_id_(tokenizer.bos_id()) {
  // A stop word the template writes (or uses as EOS) must be one token, or its text would be split into pieces.
  for (size_t i = 0; i < template_.stop_words.size(); ++i) {
    const std::string& word = template_.stop_words[i];
    if ((i > 0 || !template_.replace_eos) && !writes(template_, word)) continue;
    MT_REQUIRE(tokenizer.token_to_id(word).has_value(),
               "dataset.template '{}' needs the token {} which the model's tokenizer does not have; "
               "choose the template that matches the model",
               template_.name, word);
  }
  eos_id_ = template_.replace_eos ? tokenizer.token_to_id(template_.stop_words.at(0)) : tokenizer.eos_id();
  MT_REQUIRE(eos_id_.has_value() || (!uses_eos(template_) && !template_.efficient_eos),
             "dataset.template '{}' ends turns with the EOS token, but the tokenizer has no eos_token "
             "(tokenizer_config.json)",
             template_.name);
  // LLaMA-Factory re-adds the stop words as special tokens given as strings (replace_eos: the first one as the EOS,
  // unless it already is the EOS), and transformers then drops their strip rules.
  std::vector<std::string> readded;
  for (size_t i = 0; i < template_.stop_words.size(); ++i) {
    const std::string& word = template_.stop_words[i];
    const auto id = tokenizer.token_to_id(word);
    if (!id || (i == 0 && template_.replace_eos && id == tokenizer.eos_id())) continue;
    readded.push_back(word);
  }
  if (!readded.empty()) {
    own_tokenizer_ = tokenizer.with_plain_special_tokens(readded);
    tokenizer_ = own_tokenizer_.get();
  }
  if (template_.empty_thought)
    thought_ids_ = tokenizer_->encode(template_.thought_open + template_.thought_close, false);
}

void TemplateRenderer::append(std::vector<int32_t>& ids, const Slots& slots, const std::string& content) const {
  for (const Slot& slot : slots) {
    if (slot.kind == Slot::Kind::bos) {
      if (bos_id_) ids.push_back(*bos_id_);
    } else if (slot.kind == Slot::Kind::eos) {
      ids.push_back(*eos_id_);
    } else if (const std::string text = fill(slot.text, content); !text.empty()) {
      const std::vector<int32_t> piece = tokenizer_->encode(text, false);
      ids.insert(ids.end(), piece.begin(), piece.end());
    }
  }
}

// LLaMA-Factory's FunctionFormatter: text around a <tool_call>...</tool_call> is kept in front of the formatted call
// made of its inside; otherwise a leading thought is taken out, the rest formatted, the thought put back in front.
// Llama2-style templates format the whole content.
std::string TemplateRenderer::function_text(const std::string& content) const {
  if (template_.llama2_style) return function_call_text(template_.tool_format, content);
  // The first `open ... close` span (shortest), or npos.
  auto find_span = [&](std::string_view open, std::string_view close) {
    const size_t begin = content.find(open);
    const size_t end = begin == std::string::npos ? begin : content.find(close, begin + open.size());
    return end == std::string::npos ? std::pair{std::string::npos, size_t{0}}
                                    : std::pair{begin, end + close.size() - begin};
  };
  auto without = [&](const std::string& piece) {
    std::string rest = content;
    for (size_t at = rest.find(piece); at != std::string::npos; at = rest.find(piece, at)) rest.erase(at, piece.size());
    return rest;
  };
  const std::string_view call_open = "<tool_call>", call_close = "</tool_call>";
  if (const auto [at, size] = find_span(call_open, call_close); at != std::string::npos) {
    const std::string call = content.substr(at, size);
    const std::string inside = call.substr(call_open.size(), call.size() - call_open.size() - call_close.size());
    return without(call) + function_call_text(template_.tool_format, inside);
  }
  if (const auto [at, size] = find_span(template_.thought_open, template_.thought_close); at != std::string::npos) {
    const std::string thought = content.substr(at, size);
    return thought + function_call_text(template_.tool_format, without(thought));
  }
  return function_call_text(template_.tool_format, content);
}

std::vector<EncodedPair> TemplateRenderer::encode(const Conversation& c) const {
  const std::string system = c.system.empty() ? template_.default_system : c.system;
  std::vector<std::vector<int32_t>> messages;
  for (size_t i = 0; i < c.turns.size(); ++i) {
    const Turn& turn = c.turns[i];
    std::vector<int32_t> ids;
    std::string system_text;
    if (i == 0) {
      append(ids, template_.prefix, "");
      if (!system.empty() || !c.tools.empty()) {
        const std::string tools = c.tools.empty()                  ? ""
                                  : template_.tools_slot.empty() ? tool_system_text(template_.tool_format, c.tools)
                                                                 : fill(template_.tools_slot, c.tools);
        const std::string content = system + tools;
        if (template_.llama2_style) system_text = fill(template_.system.at(0).text, content);
        else append(ids, template_.system, content);
      }
    }
    switch (turn.role) {
      case Role::user: append(ids, template_.user, system_text + turn.content); break;
      case Role::assistant: append(ids, template_.assistant, turn.content); break;
      case Role::observation: append(ids, template_.observation, turn.content); break;
      case Role::function: append(ids, template_.function, function_text(turn.content)); break;
    }
    messages.push_back(std::move(ids));
  }
  MT_ASSERT(messages.size() % 2 == 0 && !messages.empty(), "a conversation has whole turn pairs");
  std::vector<EncodedPair> pairs;
  for (size_t i = 0; i < messages.size(); i += 2) {
    EncodedPair pair{std::move(messages[i]), std::move(messages[i + 1])};
    const std::string& answer = c.turns[i + 1].content;
    // LLaMA-Factory looks for the thought words stripped of surrounding whitespace.
    if (template_.empty_thought && answer.find(stripped(template_.thought_open)) == std::string::npos &&
        answer.find(stripped(template_.thought_close)) == std::string::npos)
      pair.response.insert(pair.response.begin(), thought_ids_.begin(), thought_ids_.end());
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

}  // namespace mt
