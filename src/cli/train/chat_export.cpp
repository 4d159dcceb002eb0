// write_chat_files (see chat_export.h).
#include "cli/train/chat_export.h"

#include "core/error.h"
#include "core/log.h"
#include "data/dataset.h"
#include "data/templates/chat_template.h"
#include "data/templates/inference_files.h"
#include "data/tokenizer.h"

namespace mt {

std::string write_chat_files(const std::filesystem::path& dir, const Config& c, const std::string& model_family) {
  if (c.training.stage != "sft" || !std::filesystem::is_regular_file(dir / "tokenizer.json")) return "";
  bool rendered = false;
  try {
    rendered = needs_tokenizer(c.dataset);
  } catch (const Error& e) {  // export of a checkpoint whose data has moved
    log::warn("export {}: no chat template written: the training data's registry is not readable ({})",
              dir.string(), e.what());
    return "";
  }
  if (!rendered) return "";
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_directory(dir);
  const std::string name =
      c.dataset.template_name == "auto" ? auto_template_name(model_family, *tokenizer) : c.dataset.template_name;
  if (name == "jinja") {  // LLaMA-Factory keeps a parsed template's Jinja as it is (replace_jinja_template off)
    log::info("export {}: the tokenizer's own chat template is kept as it was (template: jinja)", dir.string());
    return name;
  }
  write_inference_files(dir, find_chat_template(name), *tokenizer);
  log::info("export {}: chat template '{}' written as tokenizer_config.json's chat_template, with its EOS and stop "
            "words in generation_config.json", dir.string(), name);
  return name;
}

}  // namespace mt
