#!/usr/bin/env python3
"""Writes tests/data/fixtures/jinja/renders.json: what transformers' own chat-template renderer
(transformers.utils.chat_template_utils.render_jinja_template, the code behind apply_chat_template) makes of each
template in tests/data/fixtures/jinja/templates/ for a set of conversations, and the Jinja templates LLaMA-Factory
0.9.5 writes for a few of its own templates (Template._get_jinja_template).

Invariant: every "rendered" string (and every "error", for a conversation the template refuses) comes from
transformers with Jinja2 itself; strftime_now is pinned to 2024-07-26 (the C++ test pins it the same way).
Only template strings and rendered text are stored.

Templates (tests/data/fixtures/jinja/templates/): gpt_oss: the Harmony template transformers writes for GPT-OSS
(src/transformers/models/gpt_oss/convert_gpt_oss_weights_to_hf.py); qwen2_5, qwen3 (with enable_thinking), llama3, mistral, gemma2,
phi3, phi4, internlm2, yi: the chat_template of the models' tokenizer_config.json as published on the Hugging Face
hub; gemma3 and deepseek_r1_distill likewise (deepseek from llama.cpp's models/templates/); llama3_1_tools and
hermes_tools: vLLM's examples/tool_chat_template_llama3.1_json.jinja and tool_chat_template_hermes.jinja (tool use
with Llama 3.1 and Hermes/Qwen); constructs: ours, every construct our renderer supports.

Run by hand from the repository root:  /tmp/lf/bin/python tools/make_jinja_fixtures.py
"""
import datetime as real_datetime
import importlib.machinery
import json
import os
import sys
import types
from pathlib import Path

os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
stub = types.ModuleType("torchaudio")
stub.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
sys.modules["torchaudio"] = stub

from transformers import AutoTokenizer  # noqa: E402
from transformers.utils import chat_template_utils  # noqa: E402


class PinnedDatetime(real_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2024, 7, 26)


chat_template_utils.datetime = PinnedDatetime

ROOT = Path("tests/data/fixtures/jinja")
TOKENIZERS = "tests/tokenizer/fixtures"

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit"},
        "days": {"type": "array", "items": {"type": "integer"}, "description": "Days ahead"}},
        "required": ["city"]}}}]

SIMPLE = [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "2 + 3 = 5."}]
SYSTEM = [{"role": "system", "content": "You are a careful assistant."}] + SIMPLE
MULTI = SIMPLE + [{"role": "user", "content": "  And 4 + 4?  "}, {"role": "assistant", "content": "8, naïvely — ✓"}]
THINKING = [{"role": "user", "content": "Why?"},
            {"role": "assistant", "content": "<think>\nLet me think.\n</think>\n\nBecause."},
            {"role": "user", "content": "Sure?"},
            {"role": "assistant", "content": "<think>\nYes.\n</think>\n\nYes."}]
TOOL_CALL = [{"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "content": "",
              "tool_calls": [{"type": "function", "function": {
                  "name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
             {"role": "tool", "name": "get_weather", "content": "{\"temp\": 21}"},
             {"role": "assistant", "content": "It is 21 °C."}]
PARTS = [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
         {"role": "user", "content": [{"type": "text", "text": " Describe "}, {"type": "text", "text": "this."}]},
         {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]}]
STRING_TOOL_CALL = [{"role": "user", "content": "Weather?"},
                    {"role": "assistant", "content": None,
                     "tool_calls": [{"type": "function", "function": {
                         "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                    {"role": "tool", "content": "cold"}]

GPT_OSS_THINKING = [{"role": "user", "content": "Why?"},
                    {"role": "assistant", "thinking": "Let me think.", "content": "Because."}]
GPT_OSS_TOOL_CALL = [{"role": "user", "content": "Weather in Paris?"},
                     {"role": "assistant", "thinking": "Call the tool.",
                      "tool_calls": [{"type": "function", "function": {
                          "name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
                     {"role": "tool", "content": "{\"temp\": 21}"},
                     {"role": "assistant", "content": "It is 21 °C."}]

QWEN = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
LLAMA3 = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
SP = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
GEMMA = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"}
PHI4 = {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"}
DEEPSEEK = {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}

# template -> (special tokens, [(case name, messages, tools, extra variables)])
CASES = {
    "qwen2_5": (QWEN, [("simple", SIMPLE, None, {}), ("system", SYSTEM, None, {}), ("multi", MULTI, None, {}),
                       ("tools", SYSTEM, TOOLS, {}), ("tool_call", TOOL_CALL, TOOLS, {})]),
    "qwen3": (QWEN, [("simple", SIMPLE, None, {}), ("system", SYSTEM, None, {}), ("thinking", THINKING, None, {}),
                     ("no_thinking", SIMPLE, None, {"enable_thinking": False}), ("tool_call", TOOL_CALL, TOOLS, {}),
                     ("string_tool_call", STRING_TOOL_CALL, TOOLS, {})]),
    "llama3": (LLAMA3, [("simple", SIMPLE, None, {}), ("system", SYSTEM, None, {}), ("multi", MULTI, None, {})]),
    "llama3_1_tools": (LLAMA3, [("simple", SIMPLE, None, {}), ("system", SYSTEM, None, {"date_string": "1 Jan 2025"}),
                                ("tools", SYSTEM, TOOLS, {}), ("tool_call", TOOL_CALL, TOOLS, {}),
                                ("parts", PARTS, TOOLS, {})]),
    "mistral": (SP, [("simple", SIMPLE, None, {}), ("multi", MULTI, None, {}), ("system_refused", SYSTEM, None, {})]),
    "gemma2": (GEMMA, [("simple", SIMPLE, None, {}), ("multi", MULTI, None, {}), ("system_refused", SYSTEM, None, {})]),
    "gemma3": (GEMMA, [("simple", SIMPLE, None, {}), ("system", SYSTEM, None, {}), ("parts", PARTS, None, {})]),
    "phi3": (SP | {"eos_token": "<|endoftext|>"}, [("simple", SIMPLE, None, {}), ("system", SYSTEM, None, {})]),
    "phi4": (PHI4, [("simple", SIMPLE, None, {}), ("system", SYSTEM, None, {})]),
    "internlm2": (SP, [("simple", SIMPLE, None, {}), ("system", SYSTEM, None, {})]),
    "yi": (QWEN, [("simple", SIMPLE, None, {}), ("system", SYSTEM, None, {}), ("multi", MULTI, None, {})]),
    "deepseek_r1_distill": (DEEPSEEK, [("simple", SIMPLE, None, {}), ("system", SYSTEM, None, {}),
                                       ("thinking", THINKING, None, {}), ("string_tool_call", STRING_TOOL_CALL, None, {})]),
    "hermes_tools": (QWEN | {"bos_token": ""}, [("simple", SIMPLE, None, {}), ("tool_call", TOOL_CALL, TOOLS, {})]),
    "gpt_oss": ({"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>"},
                [("simple", SIMPLE, None, {}), ("system", SYSTEM, None, {"reasoning_effort": "high"}),
                 ("thinking", GPT_OSS_THINKING, None, {}), ("tool_call", GPT_OSS_TOOL_CALL, TOOLS, {}),
                 ("builtin_tools", SIMPLE, None, {"builtin_tools": ["browser", "python"],
                                                  "model_identity": "You are a test model."})]),
    "constructs": (QWEN, [("simple", SIMPLE, None, {}), ("system", SYSTEM, None, {}), ("multi", MULTI, None, {})]),
}

# LLaMA-Factory templates whose generated Jinja is rendered too, with the tokenizer fixture it is written for.
LLAMAFACTORY = {"qwen": "qwen2", "llama3": "llama3", "glm4": "glm4", "mistral": "mistral", "yi": "qwen2"}


def render(template, special, messages, tools, extra, generation):
    try:
        rendered, _ = chat_template_utils.render_jinja_template(
            conversations=[messages], tools=tools, chat_template=template, add_generation_prompt=generation,
            **special, **extra)
        return {"rendered": rendered[0]}
    except Exception as e:  # noqa: BLE001 - a refusal is recorded, and ours must refuse too
        return {"error": str(e)}


def cases_for(template, special, conversations):
    out = []
    for name, messages, tools, extra in conversations:
        for generation in (False, True):
            case = {"name": f"{name}{'_generation' if generation else ''}", "messages": messages, "tools": tools,
                    "variables": {**special, **extra}, "add_generation_prompt": generation}
            case.update(render(template, special, messages, tools, extra, generation))
            out.append(case)
    return out


def main():
    fixtures = []
    for name, (special, conversations) in CASES.items():
        source = (ROOT / "templates" / f"{name}.jinja").read_text()
        fixtures.append({"template": name, "file": f"templates/{name}.jinja",
                         "cases": cases_for(source, special, conversations)})

    sys.path.insert(0, "tools")
    from llamafactory.data.template import TEMPLATES  # noqa: E402
    for name, tok_dir in LLAMAFACTORY.items():
        tokenizer = AutoTokenizer.from_pretrained(f"{TOKENIZERS}/{tok_dir}")
        source = TEMPLATES[name]._get_jinja_template(tokenizer)
        special = {k: v for k, v in {"bos_token": tokenizer.bos_token, "eos_token": tokenizer.eos_token}.items()}
        fixtures.append({"template": f"llamafactory_{name}", "source": source,
                         "cases": cases_for(source, special, [("simple", SIMPLE, None, {}),
                                                              ("system", SYSTEM, None, {}),
                                                              ("multi", MULTI, None, {})])})
    (ROOT / "renders.json").write_text(json.dumps(fixtures, ensure_ascii=False, indent=1) + "\n")
    total = sum(len(f["cases"]) for f in fixtures)
    errors = sum("error" in c for f in fixtures for c in f["cases"])
    print(f"{len(fixtures)} templates, {total} renders ({errors} refusals) -> {ROOT / 'renders.json'}")


if __name__ == "__main__":
    main()
