#!/usr/bin/env python3
"""Writes tests/data/fixtures/templates/<template>.json: what LLaMA-Factory itself renders for a few conversations
with each chat template MegaTrain implements, using the tokenizer fixtures of tests/tokenizer/fixtures/.

Invariant: every number comes from LLaMA-Factory 0.9.5 (Template.encode_multiturn for the (prompt, response) pairs,
SupervisedDatasetProcessor._encode_data_example for input_ids/labels with and without a cutoff); nothing is
re-implemented here. The llama3 tool prompt's "Today Date" is pinned to 26 Jul 2024, as MegaTrain writes it.
baichuan2, which 0.9.5 dropped, is registered here with LLaMA-Factory's own register_template as its last published
definition had it (template.py before commit 5cccaeec8, "[model] clean obsolete models"). gemma3's multimodal plugin
is given a stand-in processor (no images, so it only passes the text through). A case LLaMA-Factory refuses is
recorded with its error message, and MegaTrain must refuse it too.

Run by hand from the repository root, in an environment with LLaMA-Factory (its data module needs peft and datasets;
torchaudio is stubbed out below):
    python3 -m venv --system-site-packages /tmp/lf && /tmp/lf/bin/pip install --no-deps llamafactory==0.9.5
    /tmp/lf/bin/pip install peft datasets omegaconf && /tmp/lf/bin/python tools/make_template_fixtures.py [NAME ...]
"""
import datetime as real_datetime
import importlib.machinery
import json
import os
import sys
import types
from pathlib import Path

os.environ.setdefault("DISABLE_VERSION_CHECK", "1")  # LLaMA-Factory pins transformers<=5.6; templates do not care
stub = types.ModuleType("torchaudio")
stub.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
sys.modules["torchaudio"] = stub

from transformers import AutoTokenizer  # noqa: E402

from llamafactory.data import tool_utils  # noqa: E402
from llamafactory.data.processor.supervised import SupervisedDatasetProcessor  # noqa: E402
from llamafactory.data.formatter import StringFormatter  # noqa: E402
from llamafactory.data.template import TEMPLATES, Llama2Template, get_template_and_fix_tokenizer  # noqa: E402
from llamafactory.data.template import register_template  # noqa: E402
from llamafactory.hparams import DataArguments  # noqa: E402


class PinnedDatetime(real_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2024, 7, 26)


tool_utils.datetime = PinnedDatetime

if "baichuan2" not in TEMPLATES:
    register_template(
        name="baichuan2",
        format_user=StringFormatter(slots=["<reserved_106>{{content}}<reserved_107>"]),
        efficient_eos=True,
    )

# What Gemma3Plugin reads from the processor; with no images in the messages none of it reaches the text.
GEMMA3_PROCESSOR = types.SimpleNamespace(image_processor=object(), boi_token="<start_of_image>",
                                         full_image_sequence="<start_of_image>", image_seq_length=0)

# What Qwen3VLPlugin (qwen3_5's image plugin) reads from the processor; with no images or videos none of it reaches
# the text.
QWEN3_VL_PROCESSOR = types.SimpleNamespace(image_processor=types.SimpleNamespace(merge_size=2),
                                           video_processor=types.SimpleNamespace(merge_size=2), model_input_names=[])

# What Llama4Plugin (llama4's image plugin) reads from the processor; with no images none of it reaches the text.
LLAMA4_PROCESSOR = types.SimpleNamespace(image_processor=object(), patch_size=14, downsample_ratio=4,
                                         model_input_names=[])

OUT = Path("tests/data/fixtures/templates")
TOKENIZERS = "tests/tokenizer/fixtures"
TEMPLATE_TOKENIZER = {"qwen": "qwen2", "qwen3": "qwen2", "chatml": "qwen2", "llama3": "llama3", "llama4": "llama4", "llama2": "llama2",
                      "mistral": "mistral", "default": "gpt2", "empty": "gpt2",
                      "gemma": "gemma", "gemma2": "gemma", "gemma3": "gemma", "phi": "phi3", "phi4": "phi4",
                      "phi4_mini": "phi4_mini", "glm4": "glm4", "glm4_moe": "glm4", "gpt_oss": "gpt_oss", "intern2": "internlm2", "baichuan2": "baichuan2",
                      "qwen3_5": "qwen2", "qwen3_5_nothink": "qwen2",
                      "qwen3_nothink": "qwen2", "yi": "qwen2", "deepseek": "llama2", "deepseekr1": "llama2",
                      "deepseekcoder": "llama2"}

TOOLS = json.dumps([
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
    {"name": "sort_numbers", "description": "Sorts numbers, ascending.",
     "parameters": {"type": "object", "properties": {"values": {"type": "array", "items": {"type": "number"},
                                                                "description": "Numbers; e.g. 1.5, 1e-05"}}}},
], ensure_ascii=False)


def turn(role, content):
    return {"role": role, "content": content}


CASES = [
    ("single_with_system", "You are a careful assistant.", "",
     [turn("user", "What is 2 + 3?"), turn("assistant", "2 + 3 = 5.")]),
    ("multi_turn_default_system", "", "",
     [turn("user", "Hello there!"), turn("assistant", "Hi! How can I help?"),
      turn("user", "  Say 你好 twice,\nplease.  "), turn("assistant", "你好 你好")]),
    ("tools_function_observation", "", TOOLS,
     [turn("user", "Weather in Paris?"),
      turn("function", json.dumps({"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}})),
      turn("observation", '{"temperature": 21.5, "sky": "clear"}'),
      turn("assistant", "It is 21.5 °C and clear in Paris.")]),
    ("thoughts_and_tool_calls", "Think first.", "[]",
     [turn("user", "Sort 3, 1, 2."),
      turn("function", "<think>\nI should call the tool.\n</think>\n\n"
                       + json.dumps([{"name": "sort_numbers", "arguments": {"values": [3, 1, 2]}},
                                     {"name": "sort_numbers", "arguments": {"values": [2.5, 1e-5]}}])),
      turn("observation", "[1, 2, 3]"),
      turn("function", 'Checking once more.<tool_call>{"name": "sort_numbers", "arguments": {"values": [1]}}'
                       "</tool_call>"),
      turn("user", "And the answer?"),
      turn("assistant", "<think>\nThe tool said 1, 2, 3.\n</think>\n\n1, 2, 3"),
      turn("user", "Thanks."),
      turn("assistant", "You are welcome.")]),
    ("one_call_per_turn", "", "[]",   # thoughts and <tool_call> for glm4, which has no parallel calls
     [turn("user", "Sort 3, 1, 2."),
      turn("function", "<think>\nOne call.\n</think>\n\n"
                       + json.dumps({"name": "sort_numbers", "arguments": {"values": [3, 1, 2]}})),
      turn("observation", "[1, 2, 3]"),
      turn("function", 'Once more.<tool_call>{"name": "sort_numbers", "arguments": {"values": [1]}}</tool_call>'),
      turn("observation", "[1]"),
      turn("assistant", "Sorted: 1, 2, 3.")]),
]
CUTOFF = 12   # small enough to cut the first pair of every case


def fnv1a64(path):
    """FNV-1a (64 bit) of a file: the test checks it to notice tokenizer fixtures that changed after this ran."""
    h = 0xCBF29CE484222325
    for byte in Path(path).read_bytes():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


# template: jinja -- LLaMA-Factory with no template named parses the tokenizer's own chat template (parse_template):
# tests/data/fixtures/templates/jinja_<name>.json from tests/data/fixtures/jinja/templates/<name>.jinja given to the
# tokenizer fixture as its chat_template. A template LLaMA-Factory cannot parse is recorded with its error.
JINJA_TOKENIZER = {"qwen2_5": "qwen2", "qwen3": "qwen2", "llama3": "llama3", "mistral": "mistral",
                   "gemma3": "gemma", "phi4": "phi4", "yi": "qwen2", "deepseek_r1_distill": "llama2"}
JINJA_TEMPLATES = "tests/data/fixtures/jinja/templates"


def encode_cases(template, tokenizer, template_arg, mm_processor):
    cases = []
    for case_name, system, tools, messages in CASES:
        record = {"name": case_name, "system": system, "tools": tools, "turns": messages}
        try:
            pairs = template.encode_multiturn(tokenizer, messages, system, tools)
        except (RuntimeError, ValueError) as e:
            # e.g. Llama2-style templates take a function call's content as bare JSON; GLM-4 has no parallel calls
            # (gpt_oss: a <think> thought is not its thought words, so the call is not JSON)
            assert isinstance(template, Llama2Template) or template_arg in ("glm4", "gpt_oss"), (template_arg, case_name, e)
            cases.append({**record, "error": str(e)})
            continue
        record["pairs"] = [[list(p), list(r)] for p, r in pairs]
        for key, cutoff in (("full", 1_000_000), ("cut", CUTOFF)):
            processor = SupervisedDatasetProcessor(template=template, tokenizer=tokenizer, processor=mm_processor,
                                                   data_args=DataArguments(template=template_arg, cutoff_len=cutoff))
            ids, labels = processor._encode_data_example(messages[:-1], messages[-1:], system, tools, [], [], [])
            record[key] = {"cutoff": cutoff, "input_ids": ids, "labels": labels}
        cases.append(record)
    return cases


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[1:])  # template names to write; none: all
    for name, tok_dir in TEMPLATE_TOKENIZER.items():
        if only and name not in only:
            continue
        tokenizer = AutoTokenizer.from_pretrained(f"{TOKENIZERS}/{tok_dir}")
        data_args = DataArguments(template=name, cutoff_len=1_000_000)
        template = get_template_and_fix_tokenizer(tokenizer, data_args)
        mm_processor = {"gemma3": GEMMA3_PROCESSOR, "qwen3_5": QWEN3_VL_PROCESSOR,
                        "qwen3_5_nothink": QWEN3_VL_PROCESSOR, "llama4": LLAMA4_PROCESSOR}.get(name)
        cases = encode_cases(template, tokenizer, name, mm_processor)
        path = OUT / f"{name}.json"
        fixture = {"template": name, "tokenizer": f"{TOKENIZERS}/{tok_dir}", "efficient_eos": template.efficient_eos,
                   "tokenizer_fnv1a64": fnv1a64(f"{TOKENIZERS}/{tok_dir}/tokenizer.json"), "cases": cases}
        path.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n")
        print(f"{path}: {len(cases)} cases")
    for name, tok_dir in JINJA_TOKENIZER.items():
        if only and f"jinja_{name}" not in only:
            continue
        tokenizer = AutoTokenizer.from_pretrained(f"{TOKENIZERS}/{tok_dir}")
        tokenizer.chat_template = Path(f"{JINJA_TEMPLATES}/{name}.jinja").read_text()
        fixture = {"template": f"jinja_{name}", "chat_template": f"{JINJA_TEMPLATES}/{name}.jinja",
                   "tokenizer": f"{TOKENIZERS}/{tok_dir}",
                   "tokenizer_fnv1a64": fnv1a64(f"{TOKENIZERS}/{tok_dir}/tokenizer.json"),
                   "special_tokens": tokenizer.special_tokens_map}
        try:
            template = get_template_and_fix_tokenizer(tokenizer, DataArguments(template=None, cutoff_len=1_000_000))
        except Exception as e:  # noqa: BLE001 - LLaMA-Factory cannot parse this template; MegaTrain must refuse it
            fixture["error"] = str(e)
        else:
            fixture.update({"efficient_eos": template.efficient_eos, "reasoning": type(template).__name__ == "ReasoningTemplate",
                            "default_system": template.default_system,
                            "cases": encode_cases(template, tokenizer, None, None)})
        path = OUT / f"jinja_{name}.json"
        path.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n")
        print(f"{path}: {len(fixture.get('cases', []))} cases{' (refused)' if 'error' in fixture else ''}")


if __name__ == "__main__":
    main()
