#!/usr/bin/env python3
"""Writes data/demo_tokenized.jsonl: a synthetic, learnable instruction task for a vocabulary of 512.

Invariant: deterministic (fixed seed, Python stdlib only); every record is
BOS, instruction words, a token list, SEP (prompt, labels -100), then the rule applied to the list and EOS
(trained), 24..120 tokens long. Run by hand from the repository root: python3 tools/make_demo_data.py
"""
import argparse
import json
import random
from pathlib import Path

VOCAB = 512
PAD, BOS, EOS, SEP = 0, 1, 2, 3
WORDS = range(4, 32)          # instruction words
CONTENT = range(32, VOCAB)    # list tokens
IGNORE = -100


def increment(xs):
    return [CONTENT.start + (x - CONTENT.start + 1) % len(CONTENT) for x in xs]


RULES = {
    "copy": lambda xs: list(xs),
    "reverse": lambda xs: xs[::-1],
    "sort": sorted,
    "increment": increment,
    "rotate": lambda xs: xs[1:] + xs[:1],
}


def instruction(rng, keywords, fillers):
    """One of the rule's keywords, placed among 0..2 meaningless filler words."""
    words = rng.choices(fillers, k=rng.randint(0, 2))
    words.insert(rng.randint(0, len(words)), rng.choice(keywords))
    return words


def make_records(count, seed):
    rng = random.Random(seed)
    words = list(WORDS)
    rng.shuffle(words)
    keywords = {rule: [words.pop() for _ in range(3)] for rule in RULES}   # three synonyms per rule
    fillers = words
    # List tokens follow a Zipf law over a shuffled ranking, so token frequencies alone are learnable early.
    ranked = list(CONTENT)
    rng.shuffle(ranked)
    cum_weights, total = [], 0.0
    for rank in range(len(ranked)):
        total += 1.0 / (rank + 1)
        cum_weights.append(total)
    records = []
    for _ in range(count):
        rule = rng.choice(list(RULES))
        phrase = instruction(rng, keywords[rule], fillers)
        n = rng.randint(10, (117 - len(phrase)) // 2)  # 2n + len(phrase) + 3 tokens in all: 24..120
        xs = rng.choices(ranked, cum_weights=cum_weights, k=n)
        prompt = [BOS] + phrase + xs + [SEP]
        answer = RULES[rule](xs) + [EOS]
        records.append({"input_ids": prompt + answer, "labels": [IGNORE] * len(prompt) + answer})
    return records


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("data/demo_tokenized.jsonl"))
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()
    records = make_records(args.count, args.seed)
    with open(args.out, "w", encoding="ascii", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
    lengths = [len(r["input_ids"]) for r in records]
    print(f"{args.out}: {len(records)} records, lengths {min(lengths)}..{max(lengths)}, "
          f"{sum(lengths)} tokens, {args.out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
