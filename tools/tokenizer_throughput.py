#!/usr/bin/env python3
"""Measures `megatrain tokenize` against the `tokenizers` library on several MB of mixed English/Chinese/code text,
one core each, and checks that both give the same ids on every line. Rates are per CPU second (user + system),
so other load on the machine does not distort them.

Invariant: the corpus comes from text already on a Debian system (English and Chinese man pages, zh_CN/zh_TW
message catalogs, Python's standard library), mixed by a fixed seed; the tokenizers are trained here (32k ids,
Qwen2's byte-level pipeline and Llama-2's SentencePiece-style one). Run by hand, nothing in CI:
    python3 tools/tokenizer_throughput.py --binary build/megatrain [--mb 8]
"""
import argparse
import gettext
import glob
import gzip
import os
import random
import re
import resource
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the reference runs on one core too
sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_tokenizer_fixtures import QWEN2_REGEX  # noqa: E402

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

ROFF = re.compile(r"\\f[BIRP]|\\-|\\\(..|\\&|\\e")


def man_lines(pattern):
    for path in sorted(glob.glob(pattern, recursive=True)):
        try:
            text = gzip.open(path).read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for line in text.split("\n"):
            if line and not line.startswith((".", "'\\\"")):
                yield ROFF.sub("", line)


def catalog_lines():
    for path in sorted(glob.glob("/usr/share/locale/zh_*/LC_MESSAGES/*.mo")):
        try:
            catalog = gettext.GNUTranslations(open(path, "rb"))._catalog
        except Exception:  # a catalog Python cannot read is simply skipped
            continue
        for value in catalog.values():
            if isinstance(value, str):
                yield from (line for line in value.split("\n") if line.strip())


def code_lines():
    for path in sorted(glob.glob(sysconfig.get_paths()["stdlib"] + "/*.py")):
        yield from Path(path).read_text(errors="replace").split("\n")


def take(lines, budget):
    out, size = [], 0
    for line in lines:
        if size >= budget:
            break
        out.append(line)
        size += len(line.encode()) + 1
    return out


def corpus(megabytes):
    budget = megabytes * 1_000_000
    chinese = take(man_lines("/usr/share/man/zh_*/**/*.gz"), budget * 0.1) + take(catalog_lines(), budget * 0.3)
    lines = chinese + take(man_lines("/usr/share/man/man[1-8]/*.gz"), budget * 0.45) + take(code_lines(), budget * 0.15)
    random.Random(0).shuffle(lines)
    return [line.replace("\r", "") for line in lines]


def train_qwen2(lines):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=32000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    return tok


def train_llama2(lines):
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    bytes_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tok.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=32000, special_tokens=["<unk>", "<s>", "</s>"] + bytes_tokens, limit_alphabet=4000,
        show_progress=False))
    tok.pre_tokenizer = None
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    return tok


def measure(name, tok, lines, binary, work):
    folder = work / name
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    text = "\n".join(lines) + "\n"
    (work / "corpus.txt").write_text(text)
    megabytes = len(text.encode()) / 1e6

    start = time.process_time()
    reference = [e.ids for e in tok.encode_batch(lines, add_special_tokens=False)]
    hf_seconds = time.process_time() - start

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(work / "corpus.txt", "rb") as stdin:
        out = subprocess.run([binary, "tokenize", "--model", str(folder)], stdin=stdin, capture_output=True,
                             check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    mt_seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    ours = [[int(x) for x in line[1:-1].split(b",") if x] for line in out.split(b"\n")[:-1]]
    mismatches = sum(a != b for a, b in zip(reference, ours)) + abs(len(reference) - len(ours))
    tokens = sum(len(ids) for ids in reference)
    print(f"{name}: {megabytes:.2f} MB, {len(lines)} lines, {tokens} tokens, {mismatches} lines differ; "
          f"megatrain tokenize {megabytes / mt_seconds:.1f} MB/s ({mt_seconds:.2f} CPU s, loading and JSON output "
          f"included), tokenizers {megabytes / hf_seconds:.1f} MB/s ({hf_seconds:.2f} CPU s, encode_batch, one thread)")
    return mismatches


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True, help="the megatrain binary")
    parser.add_argument("--mb", type=int, default=8, help="corpus size in MB")
    args = parser.parse_args()
    lines = corpus(args.mb)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bad = measure("qwen2-32k", train_qwen2(lines), lines, args.binary, work)
        bad += measure("llama2-32k", train_llama2(lines), lines, args.binary, work)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
