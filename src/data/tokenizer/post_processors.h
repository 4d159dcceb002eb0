// The post-processors of tokenizer.json that BPE checkpoints use, applied to the ids of one sequence when
// add_special_tokens is true: TemplateProcessing (its "single" template, e.g. "<s> $A"), ByteLevel (offsets
// only, so ids pass unchanged) and Sequence. Invariant: the ids tokenizers' post_process gives for one sequence.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mt::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids) const = 0;
};

// nullptr for a null post_processor (or one that never changes ids); throws mt::Error naming `where` for an
// unsupported or malformed one.
std::unique_ptr<PostProcessor> parse_post_processor(const nlohmann::json& j, const std::string& where);

}  // namespace mt::tok
