#!/usr/bin/env python3
"""Writes tests/data/fixtures/templates/<template>.json: what LLaMA-Factory itself renders for a few conversations
with each chat template MegaTrain implements, using the tokenizer fixtures of tests/tokenizer/fixtures/.

Invariant: every number comes from LLaMA-Factory 0.9.5 (Template.encode_multiturn for the (prompt, response) pairs,
SupervisedDatasetProcessor._encode_data_example for input_ids/labels with and without a cutoff); nothing is
re-implemented here. The llama3 tool prompt's "Today Date" is pinned to 26 Jul 2024, as MegaTrain writes it.

Run by hand from the repository root, in an environment with LLaMA-Factory (its data module needs peft and datasets;
torchaudio is stubbed out below):
    python3 -m venv --system-site-packages /tmp/lf && /tmp/lf/bin/pip install --no-deps llamafactory==0.9.5
    /tmp/lf/bin/pip install peft datasets omegaconf && /tmp/lf/bin/python tools/make_template_fixtures.py
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
from llamafactory.data.template import get_template_and_fix_tokenizer  # noqa: E402
from llamafactory.hparams import DataArguments  # noqa: E402


class PinnedDatetime(real_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2024, 7, 26)


tool_utils.datetime = PinnedDatetime

OUT = Path("tests/data/fixtures/templates")
TOKENIZERS = "tests/tokenizer/fixtures"
TEMPLATE_TOKENIZER = {"qwen": "qwen2", "qwen3": "qwen2", "chatml": "qwen2", "llama3": "llama3", "llama2": "llama2",
                      "mistral": "mistral", "default": "gpt2", "empty": "gpt2"}

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
]
CUTOFF = 12   # small enough to cut the first pair of every case


def fnv1a64(path):
    """FNV-1a (64 bit) of a file: the test checks it to notice tokenizer fixtures that changed after this ran."""
    h = 0xCBF29CE484222325
    for byte in Path(path).read_bytes():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, tok_dir in TEMPLATE_TOKENIZER.items():
        tokenizer = AutoTokenizer.from_pretrained(f"{TOKENIZERS}/{tok_dir}")
        data_args = DataArguments(template=name, cutoff_len=1_000_000)
        template = get_template_and_fix_tokenizer(tokenizer, data_args)
        cases = []
        for case_name, system, tools, messages in CASES:
            if name in ("llama2", "mistral") and any(m["role"] == "function" and "<" in m["content"] for m in messages):
                continue  # Llama2-style templates take a function call's content as bare JSON
            pairs = template.encode_multiturn(tokenizer, messages, system, tools)
            record = {"name": case_name, "system": system, "tools": tools, "turns": messages,
                      "pairs": [[list(p), list(r)] for p, r in pairs]}
            for key, cutoff in (("full", 1_000_000), ("cut", CUTOFF)):
                processor = SupervisedDatasetProcessor(template=template, tokenizer=tokenizer, processor=None,
                                                       data_args=DataArguments(template=name, cutoff_len=cutoff))
                ids, labels = processor._encode_data_example(messages[:-1], messages[-1:], system, tools, [], [], [])
                record[key] = {"cutoff": cutoff, "input_ids": ids, "labels": labels}
            cases.append(record)
        path = OUT / f"{name}.json"
        fixture = {"template": name, "tokenizer": f"{TOKENIZERS}/{tok_dir}",
                   "tokenizer_fnv1a64": fnv1a64(f"{TOKENIZERS}/{tok_dir}/tokenizer.json"), "cases": cases}
        path.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n")
        print(f"{path}: {len(cases)} cases")


if __name__ == "__main__":
    main()
