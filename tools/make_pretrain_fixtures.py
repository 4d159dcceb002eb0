#!/usr/bin/env python3
"""Writes tests/data/fixtures/pretrain/<case>.json: the stage-pt blocks LLaMA-Factory 0.9.5 itself makes
(llamafactory.data.get_dataset, stage "pt": its .txt / .jsonl loaders, converter and PretrainDatasetProcessor with
packing on, as its parser turns it on for pt when the YAML does not set it) of the small corpus in tests/data/fixtures/pretrain/data/, with the tokenizer fixtures
of tests/tokenizer/fixtures/.

Invariant: every block comes from LLaMA-Factory; the cases vary what its pt preprocessing depends on: the EOS (the
tokenizer's; the template's replaced EOS, phi's <|end|>; llama3's <|end_of_text|>), the BOS written over each
block's first token when the tokenizer's add_bos_token is set (transformers 5 no longer reads it from
tokenizer_config.json, so the fixture passes add_bos_token=True to AutoTokenizer as transformers 4 set it), and
preprocessing_batch_size (each batch of documents is cut on its own, its remainder dropped).

Run by hand from the repository root:  /tmp/lf/bin/python tools/make_pretrain_fixtures.py
"""
import importlib.machinery
import json
import os
import sys
import tempfile
import types
from pathlib import Path

os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
stub = types.ModuleType("torchaudio")
stub.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
sys.modules["torchaudio"] = stub

from transformers import AutoTokenizer, Seq2SeqTrainingArguments  # noqa: E402

from llamafactory.data import get_dataset  # noqa: E402
from llamafactory.data.template import get_template_and_fix_tokenizer  # noqa: E402
from llamafactory.hparams import DataArguments, ModelArguments  # noqa: E402

ROOT = Path("tests/data/fixtures/pretrain")
TOKENIZERS = "tests/tokenizer/fixtures"

# case -> (tokenizer fixture, add_bos_token given to AutoTokenizer, template, dataset(s), cutoff_len, batch size)
CASES = {
    "qwen_lines": ("qwen2", False, None, "corpus_txt", 16, 1000),
    "qwen_batches": ("qwen2", False, None, "corpus_txt,corpus_jsonl", 16, 3),
    "phi_template_eos": ("phi3", False, "phi", "corpus_jsonl", 12, 1000),
    "llama3_template_eos": ("llama3", False, "llama3", "corpus_txt", 16, 1000),
    "llama2_bos": ("llama2", True, None, "corpus_txt", 16, 4),
}


def blocks_for(tok_dir, add_bos, template_name, datasets, cutoff, batch_size):
    kwargs = {"add_bos_token": True} if add_bos else {}
    tokenizer = AutoTokenizer.from_pretrained(f"{TOKENIZERS}/{tok_dir}", **kwargs)
    data_args = DataArguments(template=template_name, dataset=datasets, dataset_dir=str(ROOT / "data"),
                              cutoff_len=cutoff, preprocessing_batch_size=batch_size, overwrite_cache=True)
    data_args.packing = True  # as LLaMA-Factory's parser turns it on for stage pt (after __post_init__)
    template = get_template_and_fix_tokenizer(tokenizer, data_args)
    with tempfile.TemporaryDirectory() as out:
        training_args = Seq2SeqTrainingArguments(output_dir=out, report_to=[])
        module = get_dataset(template, ModelArguments(model_name_or_path=f"{TOKENIZERS}/{tok_dir}"), data_args,
                             training_args, stage="pt", tokenizer=tokenizer)
    return [list(row["input_ids"]) for row in module["train_dataset"]], tokenizer


def main():
    for name, (tok_dir, add_bos, template_name, datasets, cutoff, batch_size) in CASES.items():
        blocks, tokenizer = blocks_for(tok_dir, add_bos, template_name, datasets, cutoff, batch_size)
        fixture = {"case": name, "tokenizer": f"{TOKENIZERS}/{tok_dir}", "add_bos_token": add_bos,
                   "template": template_name or "auto", "dataset": datasets, "cutoff_len": cutoff,
                   "preprocessing_batch_size": batch_size, "eos_token": tokenizer.eos_token, "blocks": blocks}
        path = ROOT / f"{name}.json"
        path.write_text(json.dumps(fixture, ensure_ascii=False) + "\n")
        print(f"{path}: {len(blocks)} blocks of {cutoff}")


if __name__ == "__main__":
    main()
