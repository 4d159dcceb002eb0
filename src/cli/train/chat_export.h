// The chat files of an exported model directory (data/templates/inference_files.h) for the run that trained it:
// written where the run rendered text datasets with a chat template (training.stage sft); a run on pre-tokenized data
// or of continued pre-training keeps the tokenizer files as they came.
// Invariant: the template written is the one training used (dataset.template, or what `auto` picked for this model
// family and tokenizer); with template: jinja the tokenizer's own chat template stays as it came, as in LLaMA-Factory.
#pragma once
#include <filesystem>
#include <string>

#include "config/config.h"

namespace mt {

// Returns the template name written ("jinja": kept), or "" (with the reason logged) when none is.
std::string write_chat_files(const std::filesystem::path& dir, const Config& config, const std::string& model_family);

}  // namespace mt
