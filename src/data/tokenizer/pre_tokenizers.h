// The pre-tokenizers of tokenizer.json for BPE checkpoints: Sequence, Split, ByteLevel, Metaspace, Digits. Each
// splits pieces of normalized text into the words the model encodes one by one.
// Invariant: the same pieces as `tokenizers` in the same order; empty pieces are dropped.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mt::tok {

struct PreToken {
  std::string text;
  bool at_text_start = false;  // begins at offset 0 of the original text (Metaspace's prepend_scheme "first")
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(std::vector<PreToken>& pieces) const = 0;
};

// nullptr for a null pre_tokenizer; throws mt::Error naming `where` for an unsupported or malformed one.
std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const nlohmann::json& j, const std::string& where);

}  // namespace mt::tok
