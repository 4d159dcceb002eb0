#!/usr/bin/env python3
"""Writes the built-in preference demos from data/alpaca_en_demo.json. data/dpo_en_demo.json: one pair per record, in
LLaMA-Factory's sharegpt ranking layout (conversations with the question, chosen and rejected assistant messages),
the chosen answer the record's own (correct) one and the rejected answer another record's (an answer to a different
question). data/kto_en_demo.json: one KTO example per record, in LLaMA-Factory's kto_en_demo layout (sharegpt
messages with role/content and a boolean label): even records desirable with their own answer, odd ones undesirable
with that other record's answer. dataset_info.json registers both as LLaMA-Factory registers its dpo_en_demo and
kto_en_demo.

Invariant: deterministic; every pair's chosen and rejected differ. Run by hand from the repository root:
python3 tools/make_dpo_demo.py
"""
import json
from pathlib import Path

DATA = Path("data")


def main():
    records = json.loads((DATA / "alpaca_en_demo.json").read_text())
    pairs, examples = [], []
    for i, r in enumerate(records):
        question = r["instruction"] + ("\n" + r["input"] if r["input"] else "")
        other = next(records[(i + k) % len(records)]["output"] for k in range(7, len(records))
                     if records[(i + k) % len(records)]["output"] != r["output"])
        examples.append({"messages": [{"role": "user", "content": question},
                                      {"role": "assistant", "content": r["output"] if i % 2 == 0 else other}],
                         "label": i % 2 == 0})
        pairs.append({"conversations": [{"from": "human", "value": question}],
                      "chosen": {"from": "gpt", "value": r["output"]},
                      "rejected": {"from": "gpt", "value": other}})
    (DATA / "dpo_en_demo.json").write_text(json.dumps(pairs, ensure_ascii=False, indent=2) + "\n")
    (DATA / "kto_en_demo.json").write_text(json.dumps(examples, ensure_ascii=False, indent=2) + "\n")
    info_file = DATA / "dataset_info.json"
    info = json.loads(info_file.read_text())
    info["dpo_en_demo"] = {"file_name": "dpo_en_demo.json", "ranking": True, "formatting": "sharegpt",
                           "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected"}}
    info["kto_en_demo"] = {"file_name": "kto_en_demo.json", "formatting": "sharegpt",
                           "columns": {"messages": "messages", "kto_tag": "label"},
                           "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                                    "assistant_tag": "assistant"}}
    info_file.write_text(json.dumps(info, ensure_ascii=False, indent=2) + "\n")
    print(f"wrote {len(pairs)} pairs to {DATA / 'dpo_en_demo.json'}, {len(examples)} KTO examples to "
          f"{DATA / 'kto_en_demo.json'}")


if __name__ == "__main__":
    main()
