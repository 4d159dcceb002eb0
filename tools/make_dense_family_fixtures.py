#!/usr/bin/env python3
"""Write the golden training fixtures of the dense RMSNorm families of issue #42 under tests/fixtures/ (run by hand,
never by CI), in the format tools/make_fixtures.py documents (model/, data/, reference.json,
reference/final.safetensors, train.yaml), plus reference/final_fp64.safetensors: the same run trained by PyTorch in
float64 from the same initial weights and data, its final weights stored as F64 under the same names.

Usage, from the repository root (torch 2.x, transformers 5.x; CPU only):

    python3 tools/make_dense_family_fixtures.py              # every case
    python3 tools/make_dense_family_fixtures.py granite      # only the named cases (DENSE.md lists every case)

Each case is transformers' own model, fp32, eager attention, 3 AdamW steps (cosine, 1 warmup step, min_lr_ratio 0.1,
clipping at 1.0) of 4 right-padded sequences 3..48 tokens long (longer than the 8-token sliding windows), vocab 128,
hidden 32, MLP 32, 4 heads / 2 kv heads × 8. It also writes tests/fixtures/DENSE.md.
"""

import argparse
import copy
import json
import shutil
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402  (seeds, threads, determinism, writers, the AdamW loop semantics)
import make_hybrid_fixtures as hf  # noqa: E402  (examples of chosen lengths, per-step batches, the training loop)
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import (  # noqa: E402
    Ernie4_5Config,
    Ernie4_5ForCausalLM,
    Exaone4Config,
    Exaone4ForCausalLM,
    GraniteConfig,
    GraniteForCausalLM,
    HunYuanDenseV1Config,
    HunYuanDenseV1ForCausalLM,
    Olmo2Config,
    Olmo2ForCausalLM,
    Olmo3Config,
    Olmo3ForCausalLM,
    SeedOssConfig,
    SeedOssForCausalLM,
    SmolLM3Config,
    SmolLM3ForCausalLM,
)

FIXTURES = mf.FIXTURES
MAX_SEQ_LEN = 64
LENGTHS = (3, 48)
WINDOW = 8
TRAINING = dict(mf.COMMON_TRAINING, num_steps=3, lr_scheduler="cosine", warmup_steps=1, min_lr_ratio=0.1,
                max_grad_norm=1.0)
DENSE_MODEL = dict(
    vocab_size=mf.VOCAB, hidden_size=32, intermediate_size=32, num_hidden_layers=3, max_position_embeddings=MAX_SEQ_LEN,
    hidden_act="silu", initializer_range=0.02, use_cache=False, pad_token_id=None, bos_token_id=None,
    eos_token_id=None, num_attention_heads=4, num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6,
    tie_word_embeddings=False,
)


def dense(**overrides):
    return {**DENSE_MODEL, **overrides}


CASES = [
    dict(case="seed_oss", seed=41, model_cls=SeedOssForCausalLM,
         config=lambda: SeedOssConfig(**dense(attention_bias=True, attention_out_bias=True, mlp_bias=False,
                                              attention_dropout=0.0, residual_dropout=0.0,
                                              rope_parameters={"rope_type": "default", "rope_theta": 100.0})),
         text="SeedOssForCausalLM: **biases on q, k, v and o** (attention_bias, attention_out_bias), none on the MLP, "
              "dropout 0, rope_theta 100."),
    dict(case="ernie4_5", seed=42, model_cls=Ernie4_5ForCausalLM,
         config=lambda: Ernie4_5Config(**dense(use_bias=True, tie_word_embeddings=True,
                                               rope_parameters={"rope_type": "default", "rope_theta": 100.0})),
         text="Ernie4_5ForCausalLM: **RoPE on interleaved pairs**, **biases on every projection** (use_bias), **tied "
              "embeddings**, rope_theta 100."),
    dict(case="smollm3", seed=43, model_cls=SmolLM3ForCausalLM,
         config=lambda: SmolLM3Config(**dense(num_hidden_layers=4, use_sliding_window=True, sliding_window=WINDOW,
                                              tie_word_embeddings=True,
                                              rope_parameters={"rope_type": "default", "rope_theta": 100.0})),
         text="SmolLM3ForCausalLM, 4 layers: **layer 3 without RoPE** (no_rope_layer_interval 4) and, by the default "
              "layer_types of use_sliding_window, **sliding (window 8)**; tied embeddings, rope_theta 100."),
    dict(case="granite", seed=44, model_cls=GraniteForCausalLM,
         config=lambda: GraniteConfig(**dense(embedding_multiplier=4.0, residual_multiplier=0.5,
                                              attention_multiplier=0.25, logits_scaling=2.5, attention_bias=True,
                                              rope_parameters={"rope_type": "default", "rope_theta": 100.0})),
         text="GraniteForCausalLM: **embedding_multiplier 4, residual_multiplier 0.5, attention_multiplier 0.25 "
              "(not 8^-½), logits_scaling 2.5**, biases on q, k, v and o, rope_theta 100."),
    dict(case="hunyuan_dense", seed=45, model_cls=HunYuanDenseV1ForCausalLM,
         config=lambda: HunYuanDenseV1Config(**dense(rope_parameters={"rope_type": "dynamic", "alpha": 4.0,
                                                                      "factor": 1.0, "rope_theta": 100.0})),
         text="HunYuanDenseV1ForCausalLM: **per-head q/k RMSNorm after RoPE** (query_layernorm, key_layernorm), "
              "**NTK-alpha RoPE** (type dynamic with alpha 4: base 100·4^(8/6))."),
    dict(case="olmo2", seed=46, model_cls=Olmo2ForCausalLM,
         config=lambda: Olmo2Config(**dense(rope_parameters={"rope_type": "default", "rope_theta": 100.0})),
         text="Olmo2ForCausalLM: **no norms before the blocks, one after each** (post_attention_layernorm, "
              "post_feedforward_layernorm), **q/k RMSNorm over the whole projection** (q_norm [32], k_norm [16]), "
              "rope_theta 100."),
    dict(case="olmo3", seed=47, model_cls=Olmo3ForCausalLM,
         config=lambda: Olmo3Config(**dense(num_hidden_layers=4, sliding_window=WINDOW, rope_parameters={
             "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 100.0},
             "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}})),
         text="Olmo3ForCausalLM, 4 layers: OLMo 2's norms, **layers 0-2 sliding (window 8)** (default layer_types), "
              "**a RoPE table per layer type** (full: linear ×2, theta 100; sliding: default, theta 50)."),
    dict(case="exaone4", seed=48, model_cls=Exaone4ForCausalLM,
         config=lambda: Exaone4Config(**dense(num_hidden_layers=4, sliding_window=WINDOW, sliding_window_pattern=4,
                                              rope_parameters={"rope_type": "default", "rope_theta": 100.0})),
         text="Exaone4ForCausalLM, 4 layers: **post-block norms**, **per-head q/k RMSNorm**, **layers 0-2 sliding "
              "(window 8)** (sliding_window_pattern 4) and **layer 3 global without RoPE**, rope_theta 100."),
]


def build_model(spec):
    """The model under torch.manual_seed(seed), every parameter then redrawn: matrices and biases N(0, 0.05²), norm
    weights 1 ± N(0, 0.1²)."""
    torch.manual_seed(spec["seed"])
    config = spec["config"]()
    config._attn_implementation = "eager"
    model = spec["model_cls"](config).to(torch.float32)
    gen = torch.Generator().manual_seed(1000 + spec["seed"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2 or name.endswith(".bias"):
                value = torch.randn(p.shape, generator=gen) * 0.05
            elif "norm" in name:
                value = 1.0 + torch.randn(p.shape, generator=gen) * 0.1
            else:
                raise RuntimeError(f"unexpected parameter {name} {tuple(p.shape)}")
            p.copy_(value)
    return model


def unpadded_batch_loss(model, examples):
    """make_fixtures.batch_loss computed sequence by sequence without padding: Σ per-sequence cross-entropy sums over
    all targets. The same mean; the float64 run uses it because transformers' float64 sliding-window masks turn padded
    rows into NaN."""
    total, count = 0.0, 0
    for ex in examples:
        input_ids, attention_mask, labels = mf.collate([ex])
        targets = int((labels[:, 1:] != mf.IGNORE).sum())
        total = total + model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss * targets
        count += targets
    return total / count


def train_fp64(model, batches, t):
    """make_hybrid_fixtures.train on a float64 copy, each batch's loss by unpadded_batch_loss."""
    padded = mf.batch_loss
    mf.batch_loss = unpadded_batch_loss
    try:
        return hf.train(model, batches, t)
    finally:
        mf.batch_loss = padded


def write_train_yaml(path, spec, t):
    mf.write_train_yaml(path, spec, t)
    text = path.read_text().replace("tools/make_fixtures.py", "tools/make_dense_family_fixtures.py")
    path.write_text(text.replace(f"max_seq_len: {mf.MAX_SEQ_LEN}\n", f"max_seq_len: {MAX_SEQ_LEN}\n"))


def final_state(model, out, name):
    """The model's tensors as save_pretrained writes them (tied weights once), by name."""
    model.save_pretrained(out / name, safe_serialization=True)
    tensors = load_file(out / name / "model.safetensors")
    shutil.rmtree(out / name)
    return tensors


def make_case(spec):
    case = spec["case"]
    out = FIXTURES / case
    if out.exists():
        shutil.rmtree(out)
    for sub in ("model", "data", "reference"):
        (out / sub).mkdir(parents=True)
    t = dict(TRAINING)
    examples = hf.make_examples(spec["seed"], t["batch_size"] * t["num_steps"], LENGTHS)
    batches = hf.step_batches(dict(spec, packing=False), examples, t)

    model = build_model(spec)
    model.save_pretrained(out / "model", safe_serialization=True)
    (out / "model" / "generation_config.json").unlink(missing_ok=True)
    mf.write_json(out / "data" / "dataset_info.json", {"fixture": {"file_name": "train.jsonl", "formatting": "tokenized"}})
    with open(out / "data" / "train.jsonl", "w") as f:
        for ex in examples:
            f.write(json.dumps(ex, separators=(",", ":")) + "\n")

    model64 = copy.deepcopy(model).double()
    losses, _, grad_norms, lrs = hf.train(model, batches, t)
    losses64, _, _, _ = train_fp64(model64, batches, t)
    final = final_state(model, out, "final")
    saved_keys = set(load_file(out / "model" / "model.safetensors").keys())
    if set(final) != saved_keys:
        raise RuntimeError(f"{case}: final tensors differ from the initial ones' names")
    save_file(final, str(out / "reference" / "final.safetensors"), metadata={"format": "pt"})
    state64 = model64.state_dict()
    save_file({k: state64[k].contiguous() for k in final}, str(out / "reference" / "final_fp64.safetensors"),
              metadata={"format": "pt"})
    notes = {"max_example_length": max(len(ex["input_ids"]) for ex in examples),
             "fp64_vs_fp32_max_loss_rel_diff": max(abs(a - b) / abs(b) for a, b in zip(losses, losses64))}
    reference = {"case": case, "architecture": spec["model_cls"].__name__,
                 "training": {k: t[k] for k in ("batch_size", "num_steps", "learning_rate", "lr_scheduler",
                                                "warmup_steps", "min_lr_ratio", "weight_decay", "max_grad_norm",
                                                "beta1", "beta2", "eps")},
                 "losses": losses, "grad_norms": grad_norms, "lrs": lrs, "notes": notes}
    mf.write_json(out / "reference.json", reference)
    write_train_yaml(out / "train.yaml", spec, t)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{case}: losses {losses}, notes {notes}, {size} bytes")


def write_readme():
    lines = ["# Dense RMSNorm family fixtures (issue #42)", "",
             "Written by `tools/make_dense_family_fixtures.py` (run by hand; same format and training loop as "
             "`tools/make_fixtures.py`, see README.md, plus `reference/final_fp64.safetensors`, the same run in "
             "float64): transformers' own models, fp32, eager attention, 3 AdamW steps (cosine, 1 warmup step, "
             "min_lr_ratio 0.1, clipping at 1.0) of 4 padded sequences 3..48 tokens; vocab 128, hidden 32, "
             "MLP 32, 4 heads / 2 kv heads × 8, 3 layers unless said. The float64 run computes each step's loss "
             "sequence by sequence without padding (the same mean).", "",
             "| case | what it covers | losses | notes |", "|---|---|---|---|"]
    for spec in (s for s in CASES if (FIXTURES / s["case"] / "reference.json").exists()):
        ref = json.loads((FIXTURES / spec["case"] / "reference.json").read_text())
        losses = ", ".join(f"{x:.6f}" for x in ref["losses"])
        notes = "; ".join(f"{k} {v:.3g}" for k, v in ref["notes"].items())
        lines.append(f"| `{spec['case']}` | {spec['text']} | {losses} | {notes} |")
    (FIXTURES / "DENSE.md").write_text("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description="Write the dense family fixtures and DENSE.md under tests/fixtures/.")
    parser.add_argument("cases", nargs="*", choices=[c["case"] for c in CASES], help="default: every case")
    chosen = set(parser.parse_args().cases)
    for spec in (c for c in CASES if not chosen or c["case"] in chosen):
        make_case(spec)
    write_readme()
    return 0


if __name__ == "__main__":
    sys.exit(main())
