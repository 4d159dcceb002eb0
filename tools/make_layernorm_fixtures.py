#!/usr/bin/env python3
"""Write the golden training fixtures of the LayerNorm families under tests/fixtures/ (run by hand, never by CI), in
the format tools/make_fixtures.py documents (model/, data/, reference.json, reference/final.safetensors, train.yaml),
plus reference/final_fp64.safetensors: the same run trained in float64 end to end (make_fixtures.fp64_run, so that
transformers' explicit float32 casts in CohereLayerNorm and the rotary embedding are float64 too; same initial weights
and data; each batch's loss taken example by example, see example_losses_fp64), its final weights stored as float64,
and reference.json's "fp64" (its losses, whether it is finite).

Usage, from the repository root (torch 2.x, transformers 5.x; CPU only):

    python3 tools/make_layernorm_fixtures.py              # every case
    python3 tools/make_layernorm_fixtures.py starcoder2   # only the named cases

Cases (vocab 128, hidden 32, 4 heads / 2 kv heads × 8, 3 AdamW steps of 4 right-padded sequences of 3..60 tokens):
  starcoder2  Starcoder2ForCausalLM, 3 layers: nn.LayerNorm with bias, biases on every projection, the non-gated
              gelu_pytorch_tanh MLP c_fc → c_proj, a sliding window of 16 on every layer, tied embeddings.
  cohere      CohereForCausalLM, 3 layers: attention and MLP in parallel from one LayerNorm without bias, per-head
              q/k LayerNorm with a weight per head (use_qk_norm), interleaved RoPE, logit_scale 0.25, tied embeddings.
  cohere2     Cohere2ForCausalLM, 4 layers: the cohere layer without q/k norm; layers 0-2 sliding (window 8, RoPE),
              layer 3 global without RoPE; logit_scale 0.125.

It also writes tests/fixtures/LAYERNORM.md (the cases and what each reference recorded; `--readme` writes only that).
Every parameter is redrawn from a fixed generator (matrices N(0, 0.05²), norm weights 1 + N(0, 0.1²), biases
N(0, 0.1²)) so that no bias or norm starts at a point where its gradient vanishes.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402  (seeds, threads, determinism, writers, AdamW loop semantics)
import make_hybrid_fixtures as mh  # noqa: E402  (examples with masked prompts, the per-batch training loop)
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import (  # noqa: E402
    Cohere2Config,
    Cohere2ForCausalLM,
    CohereConfig,
    CohereForCausalLM,
    Starcoder2Config,
    Starcoder2ForCausalLM,
)

FIXTURES = mf.FIXTURES
MAX_SEQ_LEN = 64
LENGTHS = (3, 60)
TRAINING = dict(mf.COMMON_TRAINING, num_steps=3, lr_scheduler="cosine", warmup_steps=1, min_lr_ratio=0.1,
                max_grad_norm=1.0)

MODEL = dict(vocab_size=mf.VOCAB, hidden_size=32, intermediate_size=64, max_position_embeddings=MAX_SEQ_LEN,
             initializer_range=0.02, use_cache=False, pad_token_id=None, bos_token_id=None, eos_token_id=None,
             num_attention_heads=4, num_key_value_heads=2)

CASES = [
    dict(case="starcoder2", seed=41, model_cls=Starcoder2ForCausalLM,
         config=lambda: Starcoder2Config(**MODEL, num_hidden_layers=3, hidden_act="gelu_pytorch_tanh",
                                         norm_epsilon=1e-5, use_bias=True, sliding_window=16,
                                         tie_word_embeddings=True, residual_dropout=0.0, embedding_dropout=0.0,
                                         attention_dropout=0.0,
                                         rope_parameters={"rope_type": "default", "rope_theta": 100.0})),
    dict(case="cohere", seed=42, model_cls=CohereForCausalLM,
         config=lambda: CohereConfig(**MODEL, num_hidden_layers=3, hidden_act="silu", layer_norm_eps=1e-5,
                                     use_qk_norm=True, logit_scale=0.25, tie_word_embeddings=True,
                                     attention_bias=False,
                                     rope_parameters={"rope_type": "default", "rope_theta": 100.0})),
    dict(case="cohere2", seed=43, model_cls=Cohere2ForCausalLM,
         config=lambda: Cohere2Config(**MODEL, num_hidden_layers=4, hidden_act="silu", layer_norm_eps=1e-5,
                                      logit_scale=0.125, tie_word_embeddings=True, attention_bias=False,
                                      sliding_window=8,
                                      layer_types=["sliding_attention"] * 3 + ["full_attention"],
                                      rope_parameters={"rope_type": "default", "rope_theta": 100.0})),
]


def build_model(spec):
    """The model under torch.manual_seed(seed), every parameter then redrawn (see the module docstring)."""
    torch.manual_seed(spec["seed"])
    config = spec["config"]()
    config._attn_implementation = "eager"
    model = spec["model_cls"](config).to(torch.float32)
    gen = torch.Generator().manual_seed(1000 + spec["seed"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):  # hidden LayerNorms and Cohere's [heads, head_dim] q/k norms
                value = 1.0 + torch.randn(p.shape, generator=gen) * 0.1
            elif p.ndim == 2:
                value = torch.randn(p.shape, generator=gen) * 0.05
            elif name.endswith("bias"):
                value = torch.randn(p.shape, generator=gen) * 0.1
            else:
                raise RuntimeError(f"unexpected parameter {name} {tuple(p.shape)}")
            p.copy_(value)
    return model


def example_losses_fp64(model, batch):
    """The batch's mean cross-entropy computed in float64 example by example, unpadded (transformers' loss upcasts the
    logits to float32, and float64's additive mask overflows to -inf on a padded row past the sliding window, whose
    softmax is then NaN); the same mean over the same targets as the padded batch."""
    total, count = 0.0, 0
    for ex in batch:
        ids = torch.tensor([ex["input_ids"]])
        labels = torch.tensor(ex.get("labels", ex["input_ids"])[1:])
        logits = model(input_ids=ids).logits[0, :-1]
        total = total + torch.nn.functional.cross_entropy(logits, labels, ignore_index=mf.IGNORE, reduction="sum")
        count += int((labels != mf.IGNORE).sum())
    return total / count


def train_fp64(model, batches, t):
    """mh.train's loop (AdamW, decay on ndim >= 2, LambdaLR, clipping) on a float64 model, its batch loss
    example_losses_fp64 (mh.train reads mf.batch_loss, swapped for the run); the per-step losses."""
    batch_loss = mf.batch_loss
    mf.batch_loss = example_losses_fp64
    try:
        return mh.train(model, batches, t)[0]
    finally:
        mf.batch_loss = batch_loss


def final_state(model, out):
    """The model's tensors as save_pretrained writes them (tied: no lm_head), in the model's dtype."""
    tmp = out / "reference" / "final_dir"
    model.save_pretrained(tmp, safe_serialization=True)
    tensors = load_file(tmp / "model.safetensors")
    shutil.rmtree(tmp)
    return tensors


def write_train_yaml(path, spec, t):
    mf.write_train_yaml(path, spec, t)
    text = path.read_text().replace("tools/make_fixtures.py", "tools/make_layernorm_fixtures.py")
    path.write_text(text)


def window_notes(model, examples):
    """The sliding window of the model (if any) and how many examples are longer than it (the masks must cut)."""
    window = getattr(model.config, "sliding_window", None)
    notes = {"max_example_length": max(len(ex["input_ids"]) for ex in examples)}
    if window:
        notes.update(sliding_window=window, examples_past_window=sum(len(ex["input_ids"]) > window for ex in examples))
    return notes


def make_case(spec):
    case = spec["case"]
    out = FIXTURES / case
    if out.exists():
        shutil.rmtree(out)
    for sub in ("model", "data", "reference"):
        (out / sub).mkdir(parents=True)
    t = dict(TRAINING)
    examples = mh.make_examples(spec["seed"], t["batch_size"] * t["num_steps"], LENGTHS)
    batches = [examples[k * t["batch_size"]:(k + 1) * t["batch_size"]] for k in range(t["num_steps"])]

    model = build_model(spec)
    model.save_pretrained(out / "model", safe_serialization=True)
    (out / "model" / "generation_config.json").unlink(missing_ok=True)
    mf.write_json(out / "data" / "dataset_info.json", {"fixture": {"file_name": "train.jsonl", "formatting": "tokenized"}})
    with open(out / "data" / "train.jsonl", "w") as f:
        for ex in examples:
            f.write(json.dumps(ex, separators=(",", ":")) + "\n")

    model64 = build_model(spec)  # the same initial weights, trained in float64 end to end (mf.fp64_run)
    losses64 = mf.fp64_run(model64, lambda m: train_fp64(m, batches, t))
    losses, _, grad_norms, lrs = mh.train(model, batches, t)
    final = final_state(model, out)
    save_file(final, str(out / "reference" / "final.safetensors"), metadata={"format": "pt"})
    final64 = final_state(model64, out)
    if set(final) != set(load_file(out / "model" / "model.safetensors")) or set(final64) != set(final):
        raise RuntimeError(f"{case}: final tensors differ from the initial ones' names")
    fp64 = mf.write_fp64_reference(out, final64, losses64)

    notes = window_notes(model, examples)
    notes["fp32_vs_fp64_max_loss_rel_diff"] = max(abs(a - b) / abs(b) for a, b in zip(losses, losses64))
    reference = {"case": case, "architecture": spec["model_cls"].__name__,
                 "training": {k: t[k] for k in ("batch_size", "num_steps", "learning_rate", "lr_scheduler",
                                                "warmup_steps", "min_lr_ratio", "weight_decay", "max_grad_norm",
                                                "beta1", "beta2", "eps")},
                 "losses": losses, "grad_norms": grad_norms, "lrs": lrs, "notes": notes, "fp64": fp64}
    mf.write_json(out / "reference.json", reference)
    write_train_yaml(out / "train.yaml", spec, t)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{case}: losses {losses}, notes {notes}, {size} bytes")


CASE_TEXT = {
    "starcoder2": "Starcoder2ForCausalLM, 3 layers: nn.LayerNorm with bias (input, post-attention, final), biases on "
                  "q/k/v/o and on the **non-gated** gelu_pytorch_tanh MLP (c_fc → c_proj), **sliding window 16** on "
                  "every layer, tied embeddings, rope theta 100.",
    "cohere": "CohereForCausalLM, 3 layers: **parallel residual** (attention and MLP from one LayerNorm without bias), "
              "**per-head q/k LayerNorm** with a weight per head (use_qk_norm), **interleaved RoPE** (theta 100), "
              "**logit_scale 0.25**, tied embeddings.",
    "cohere2": "Cohere2ForCausalLM, 4 layers: the cohere layer without q/k norm; layers 0-2 **sliding (window 8) with "
               "RoPE**, layer 3 **global without RoPE**; logit_scale 0.125, tied embeddings.",
}


def write_readme():
    lines = ["# LayerNorm family fixtures", "",
             "Written by `tools/make_layernorm_fixtures.py` (run by hand; same format and training loop as "
             "`tools/make_fixtures.py`, see README.md, plus `reference/final_fp64.safetensors`, the same run in "
             "float64): transformers' own models, eager attention, 3 AdamW steps (cosine, 1 warmup step, "
             "min_lr_ratio 0.1, clipping at 1.0) of 4 right-padded sequences of 3..60 tokens, every other one with a "
             "masked prompt.", "",
             "| case | what it covers | losses | notes |", "|---|---|---|---|"]
    for spec in CASES:
        if not (FIXTURES / spec["case"] / "reference.json").exists():
            continue
        ref = json.loads((FIXTURES / spec["case"] / "reference.json").read_text())
        losses = ", ".join(f"{x:.6f}" for x in ref["losses"])
        notes = "; ".join(f"{k} {v}" for k, v in ref["notes"].items())
        lines.append(f"| `{spec['case']}` | {CASE_TEXT[spec['case']]} | {losses} | {notes} |")
    (FIXTURES / "LAYERNORM.md").write_text("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description="Write the LayerNorm family fixtures under tests/fixtures/.")
    names = [c["case"] for c in CASES]
    parser.add_argument("cases", nargs="*", metavar="CASE", help="default all: " + ", ".join(names))
    parser.add_argument("--readme", action="store_true", help="only write tests/fixtures/LAYERNORM.md")
    args = parser.parse_args()
    if set(args.cases) - set(names):
        parser.error(f"unknown case(s) {', '.join(sorted(set(args.cases) - set(names)))}")
    for spec in [] if args.readme else [c for c in CASES if not args.cases or c["case"] in args.cases]:
        make_case(spec)
    write_readme()
    return 0


if __name__ == "__main__":
    sys.exit(main())
