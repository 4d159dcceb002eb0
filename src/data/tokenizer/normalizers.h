// The normalizers of tokenizer.json that byte-level and SentencePiece-style BPE checkpoints use: Sequence, NFC,
// Replace, Prepend. Invariant: normalize maps valid UTF-8 to valid UTF-8 exactly as `tokenizers` does.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace mt::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// nullptr for a null normalizer; throws mt::Error naming `where` for an unsupported or malformed one.
std::unique_ptr<Normalizer> parse_normalizer(const nlohmann::json& j, const std::string& where);

}  // namespace mt::tok
