// The decoders of tokenizer.json for BPE checkpoints: ByteLevel, Sequence, Replace, ByteFallback, Fuse, Strip,
// Metaspace. Each rewrites the list of token strings (tokenizers' decode_chain); decode joins the final list.
// Invariant: the same strings as `tokenizers`; byte sequences that are not UTF-8 become U+FFFD as it does.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mt::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// nullptr for a null decoder; throws mt::Error naming `where` for an unsupported or malformed one.
std::unique_ptr<Decoder> parse_decoder(const nlohmann::json& j, const std::string& where);

}  // namespace mt::tok
