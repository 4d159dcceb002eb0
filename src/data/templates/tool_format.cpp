// Tool prompt and function-call text per tool format (LLaMA-Factory's DefaultToolUtils, QwenToolUtils,
// Llama3ToolUtils, MistralToolUtils, GLM4ToolUtils, GLM4MOEToolUtils, Qwen35ToolUtils). Invariant: the prompt wording is LLaMA-Factory's, character for
// character.
#include "data/templates/tool_format.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_depth.h"
#include "data/json_message.h"
#include "data/templates/python_json.h"

namespace mt {
namespace {

using nlohmann::ordered_json;

ordered_json parse(const std::string& text, const char* what) {
  require_json_depth(text, what);
  try {
    return ordered_json::parse(text);
  } catch (const ordered_json::parse_error& e) {
    throw Error(fmt::format("{} is not valid JSON: {}", what, json_message(e)));
  }
}

// Python's str() of a JSON value inside a format string: strings as they are, anything else as JSON text.
std::string str(const ordered_json& v) { return v.is_string() ? v.get<std::string>() : python_json_dumps(v); }

std::string get_str(const ordered_json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? "" : str(*it);
}

bool is_function_type(const ordered_json& tool) {
  const auto it = tool.find("type");
  return it != tool.end() && *it == "function";
}

// {"type": "function", "function": tool} unless the tool is already written that way.
ordered_json wrapped(const ordered_json& tool) {
  if (is_function_type(tool)) return tool;
  ordered_json w = ordered_json::object();
  w["type"] = "function";
  w["function"] = tool;
  return w;
}

std::string generic_tools(const ordered_json& tools) {
  std::string tool_text, names;
  for (const ordered_json& entry : tools) {
    const ordered_json tool = is_function_type(entry) ? entry.value("function", ordered_json::object()) : entry;
    MT_REQUIRE(tool.is_object() && tool.contains("name"), "tools: every tool needs a \"name\"");
    std::string params;
    const ordered_json parameters = tool.value("parameters", ordered_json::object());
    const ordered_json required = parameters.is_object() ? parameters.value("required", ordered_json::array())
                                                         : ordered_json::array();
    const ordered_json properties = parameters.is_object() ? parameters.value("properties", ordered_json::object())
                                                           : ordered_json::object();
    for (const auto& [name, param] : properties.items()) {
      std::string required_text, enum_text, items_text;
      for (const ordered_json& r : required)
        if (r == name) required_text = ", required";
      if (const auto e = param.find("enum"); e != param.end() && e->is_array() && !e->empty()) {
        std::string joined;
        for (const ordered_json& v : *e) joined += (joined.empty() ? "" : ", ") + str(v);
        enum_text = ", should be one of [" + joined + "]";
      }
      if (const auto items = param.find("items"); items != param.end() && items->is_object() && !items->empty())
        items_text = ", where each item should be " + get_str(*items, "type");
      params += fmt::format("  - {} ({}{}): {}{}{}\n", name, get_str(param, "type"), required_text,
                            get_str(param, "description"), enum_text, items_text);
    }
    tool_text += fmt::format("> Tool Name: {}\nTool Description: {}\nTool Args:\n{}\n", str(tool["name"]),
                             get_str(tool, "description"), params);
    names += (names.empty() ? "" : ", ") + str(tool["name"]);
  }
  return "You have access to the following tools:\n" + tool_text +
         "Use the following format if using a tool:\n```\nAction: tool name (one of [" + names +
         "])\nAction Input: the input to the tool, in a JSON format representing the kwargs "
         "(e.g. ```{\"input\": \"hello world\", \"num_beams\": 5}```)\n```\n";
}

std::string qwen_tools(const ordered_json& tools) {
  std::string tool_text;
  for (const ordered_json& tool : tools) tool_text += "\n" + python_json_dumps(wrapped(tool));
  return "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
         "You are provided with function signatures within <tools></tools> XML tags:\n<tools>" +
         tool_text +
         "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
         "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
         "\"arguments\": <args-json-object>}\n</tool_call>";
}

// Qwen 3.5: the bare function objects, one per line, and XML-style calls.
std::string qwen3_5_tools(const ordered_json& tools) {
  std::string tool_text;
  for (const ordered_json& tool : tools)
    tool_text += "\n" + python_json_dumps(is_function_type(tool) ? tool.value("function", tool) : tool);
  return "\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>" + tool_text +
         "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
         "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
         "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple "
         "lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
         "- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested "
         "within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n"
         "- You may provide optional reasoning for your function call in natural language BEFORE the function call, "
         "but NOT after\n- If there is no function call available, answer the question like normal with your current "
         "knowledge and do not tell the user about function calls\n</IMPORTANT>";
}

std::string llama3_tools(const ordered_json& tools) {
  std::string tool_text;
  for (const ordered_json& tool : tools) tool_text += python_json_dumps(wrapped(tool), 4) + "\n\n";
  return "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
         "You have access to the following functions. To call a function, please respond with JSON for a function "
         "call. Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
         "value}. Do not use variables.\n\n" +
         tool_text;
}

std::string mistral_tools(const ordered_json& tools) {
  ordered_json list = ordered_json::array();
  for (const ordered_json& tool : tools) list.push_back(wrapped(tool));
  return "[AVAILABLE_TOOLS] " + python_json_dumps(list) + "[/AVAILABLE_TOOLS]";
}

std::string glm4_tools(const ordered_json& tools) {
  std::string tool_text;
  for (const ordered_json& entry : tools) {
    const ordered_json tool = is_function_type(entry) ? entry.value("function", ordered_json()) : entry;
    MT_REQUIRE(tool.is_object() && tool.contains("name"), "tools: every tool needs a \"name\"");
    tool_text += "\n\n## " + str(tool["name"]) + "\n\n" + python_json_dumps(tool, 4) +
                 "\n在调用上述函数时，请使用 Json 格式表示调用的参数。";
  }
  return "你是一个名为 ChatGLM 的人工智能助手。你是基于智谱 AI 公司训练的语言模型 GLM-4 模型开发的，"
         "你的任务是针对用户的问题和要求提供适当的答复和支持。\n\n# 可用工具" +
         tool_text;
}

// GLM-4.5's (GLM4MOEToolUtils): Qwen's tool list with its own call format.
std::string glm4_moe_tools(const ordered_json& tools) {
  std::string tool_text;
  for (const ordered_json& tool : tools) tool_text += "\n" + python_json_dumps(wrapped(tool));
  return "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
         "You are provided with function signatures within <tools></tools> XML tags:\n<tools>" +
         tool_text +
         "\n</tools>\n\nFor each function call, output the function name and arguments within the following XML "
         "format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>"
         "\n<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>\n";
}

}  // namespace

std::string tool_system_text(ToolFormat format, const std::string& tools_json) {
  const ordered_json tools = parse(tools_json, "tools");
  MT_REQUIRE(tools.is_array(), "tools must be a JSON list of tools, got {}", tools.type_name());
  if (tools.empty()) return "";
  for (const ordered_json& tool : tools) MT_REQUIRE(tool.is_object(), "tools: every tool must be a JSON object");
  switch (format) {
    case ToolFormat::generic: return generic_tools(tools);
    case ToolFormat::qwen: return qwen_tools(tools);
    case ToolFormat::llama3: return llama3_tools(tools);
    case ToolFormat::mistral: return mistral_tools(tools);
    case ToolFormat::glm4: return glm4_tools(tools);
    case ToolFormat::qwen3_5: return qwen3_5_tools(tools);
    case ToolFormat::glm4_moe: return glm4_moe_tools(tools);
  }
  MT_ASSERT(false, "unknown tool format");
  return "";
}

std::string function_call_text(ToolFormat format, const std::string& content) {
  ordered_json calls = parse(content, "function call");
  if (!calls.is_array()) calls = ordered_json::array({calls});
  std::vector<std::pair<std::string, ordered_json>> functions;
  for (const ordered_json& call : calls) {
    MT_REQUIRE(call.is_object() && call.contains("name") && call.contains("arguments"),
               "function call: every call needs \"name\" and \"arguments\"");
    functions.emplace_back(str(call["name"]), call["arguments"]);
  }
  std::string out;
  switch (format) {
    case ToolFormat::generic:
      for (const auto& [name, args] : functions)
        out += (out.empty() ? "" : "\n") + fmt::format("Action: {}\nAction Input: {}", name, python_json_dumps(args));
      return out;
    case ToolFormat::qwen:
      for (const auto& [name, args] : functions) {
        const ordered_json call = {{"name", name}, {"arguments", args}};
        out += (out.empty() ? "" : "\n") + ("<tool_call>\n" + python_json_dumps(call) + "\n</tool_call>");
      }
      return out;
    case ToolFormat::llama3: {
      ordered_json list = ordered_json::array();
      for (const auto& [name, args] : functions) list.push_back({{"name", name}, {"parameters", args}});
      return python_json_dumps(list.size() == 1 ? list[0] : list);
    }
    case ToolFormat::mistral: {
      ordered_json list = ordered_json::array();
      for (const auto& [name, args] : functions) list.push_back({{"name", name}, {"arguments", args}});
      return python_json_dumps(list);
    }
    case ToolFormat::glm4:
      MT_REQUIRE(functions.size() == 1, "function call: GLM-4 does not support parallel functions; got {} calls",
                 functions.size());
      return functions[0].first + "\n" + python_json_dumps(functions[0].second);
    case ToolFormat::qwen3_5:
      for (const auto& [name, args] : functions) {
        MT_REQUIRE(args.is_object(), "function call: Qwen 3.5 calls need \"arguments\" as a JSON object");
        std::string call = "<tool_call>\n<function=" + name + ">";
        for (const auto& [key, value] : args.items())
          call += "\n<parameter=" + key + ">\n" + str(value) + "\n</parameter>";
        out += (out.empty() ? "" : "\n") + call + "\n</function>\n</tool_call>";
      }
      return out;
    case ToolFormat::glm4_moe:  // per call: name, then each argument's key and value (a string as it is)
      for (const auto& [name, args] : functions) {
        std::string call = "\n<tool_call>" + name;
        MT_REQUIRE(args.is_object(), "function call: GLM-4.5's arguments must be a JSON object");
        for (const auto& [key, value] : args.items())
          call += "\n<arg_key>" + key + "</arg_key>\n<arg_value>" + str(value) + "</arg_value>";
        out += (out.empty() ? "" : "\n") + call;
      }
      return out;
  }
  MT_ASSERT(false, "unknown tool format");
  return "";
}

}  // namespace mt
