// Tool descriptions and function calls as text, per LLaMA-Factory's tool formats (tool_utils.py): generic
// ("default"), qwen, llama3, mistral, glm4 and qwen3_5. Invariant: JSON inside the text is written as Python's json.dumps would.
#pragma once
#include <string>

#include "data/templates/chat_template.h"

namespace mt {

// The text appended to the system message for `tools_json` (a JSON list of tools, OpenAI-style or bare).
// llama3's "Today Date" is fixed to "26 Jul 2024" (the Llama 3.1 chat template's default) so runs are
// reproducible; LLaMA-Factory writes the current date there. Invalid JSON or a non-list raises mt::Error.
std::string tool_system_text(ToolFormat format, const std::string& tools_json);

// The assistant text for a function-call turn whose content is `{"name": ..., "arguments": {...}}` or a list of
// them. Invalid JSON, a call without name/arguments, or (glm4) anything but exactly one call raises mt::Error.
std::string function_call_text(ToolFormat format, const std::string& content);

}  // namespace mt
