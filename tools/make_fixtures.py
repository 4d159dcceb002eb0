#!/usr/bin/env python3
"""Write the tiny golden training fixtures under tests/fixtures/ (run by hand, never by CI).

Usage, from the repository root (Python 3 with torch 2.x, transformers 5.x, safetensors; CPU only):

    python3 tools/make_fixtures.py

For each case (llama, qwen2, qwen3, mistral) it writes tests/fixtures/<case>/:

  model/config.json, model/model.safetensors
      The INITIAL fp32 weights of a tiny random model (vocab 128, hidden 32, intermediate 64,
      3 layers, max_position_embeddings 64), via save_pretrained(safe_serialization=True).
      Tied-embedding models have no lm_head.weight tensor in the file.
      The llama case's config.json is rewritten afterwards into the OLD rope format (top-level
      "rope_theta" and "rope_scaling", no "rope_parameters"); the script checks that transformers
      loads it to exactly the same loss.
  data/dataset_info.json, data/train.jsonl
      16 pre-tokenized examples ({"input_ids": [...], "labels": [...]}; labels omitted on some lines,
      meaning labels = input_ids). Step k uses lines 4k..4k+3 in file order.
  reference.json
      The training hyper-parameters and, per step, the loss, the pre-clip total gradient L2 norm and
      the learning rate used, at full float precision.
  reference/final.safetensors
      Every parameter after the last step, fp32, HF names (no lm_head.weight when tied).
  train.yaml
      A MegaTrain config for the same run (relative paths; the tests override them).

It also writes tests/fixtures/README.md and prints sanity checks at the end.

Everything is deterministic: fixed seeds, one thread, torch.use_deterministic_algorithms(True),
float32 throughout. The training loop in train() defines the semantics MegaTrain must reproduce.
"""

import json
import math
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

import safetensors  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

VOCAB = 128
PAD_ID = 0
IGNORE = -100
MAX_SEQ_LEN = 64  # dataset.max_seq_len in train.yaml; every example is far shorter (no truncation)

COMMON_MODEL = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=3,
    max_position_embeddings=64,
    hidden_act="silu",
    initializer_range=0.02,
    use_cache=False,
    pad_token_id=None,
    bos_token_id=None,
    eos_token_id=None,
)

COMMON_TRAINING = dict(
    batch_size=4,
    num_steps=4,
    learning_rate=1e-3,
    weight_decay=0.1,
    beta1=0.9,
    beta2=0.999,
    eps=1e-8,
)

CASES = [
    dict(
        case="llama",
        seed=1,
        model_cls=LlamaForCausalLM,
        config=LlamaConfig(
            **COMMON_MODEL,
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            attention_bias=False,
            mlp_bias=False,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 10000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        ),
        # Written into config.json after save_pretrained (old transformers format).
        old_rope_format=dict(
            rope_theta=10000.0,
            rope_scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        ),
        training=dict(lr_scheduler="cosine", warmup_steps=1, min_lr_ratio=0.1, max_grad_norm=1.0),
    ),
    dict(
        case="qwen2",
        seed=2,
        model_cls=Qwen2ForCausalLM,
        config=Qwen2Config(
            **COMMON_MODEL,
            num_attention_heads=4,
            num_key_value_heads=1,
            rms_norm_eps=1e-6,
            tie_word_embeddings=True,
            use_sliding_window=False,
            # A small theta turns every rotary pair within 20 positions. With Qwen2's usual 1e6 the slow
            # pairs barely rotate, the k_proj bias gradient is zero up to rounding (softmax is invariant to
            # a shared key offset) and Adam amplifies that rounding into the update.
            rope_parameters={"rope_type": "default", "rope_theta": 100.0},
        ),
        training=dict(lr_scheduler="linear", warmup_steps=0, min_lr_ratio=0.0, max_grad_norm=1.0),
    ),
    dict(
        case="qwen3",
        seed=3,
        model_cls=Qwen3ForCausalLM,
        config=Qwen3Config(
            **COMMON_MODEL,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            rms_norm_eps=1e-6,
            tie_word_embeddings=False,
            attention_bias=False,
            use_sliding_window=False,
            rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0},
        ),
        training=dict(lr_scheduler="constant", warmup_steps=2, min_lr_ratio=0.0, max_grad_norm=0.0),
    ),
    dict(
        case="mistral",
        seed=4,
        model_cls=MistralForCausalLM,
        config=MistralConfig(
            **COMMON_MODEL,
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            sliding_window=5,
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 10000.0,
                "factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        ),
        training=dict(lr_scheduler="cosine", warmup_steps=0, min_lr_ratio=0.0, max_grad_norm=1.0),
    ),
]


# ----------------------------------------------------------------------------------------------
# Initial weights and data
# ----------------------------------------------------------------------------------------------


def build_model(spec):
    """Construct the model with torch.manual_seed(seed), then perturb every parameter."""
    torch.manual_seed(spec["seed"])
    config = spec["config"]
    config._attn_implementation = "eager"
    model = spec["model_cls"](config).to(torch.float32)
    gen = torch.Generator().manual_seed(1000 + spec["seed"])
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied weights appear once
            if p.ndim == 2:  # embeddings, projections, lm_head
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
            elif name.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
            elif p.ndim == 1 and "norm" in name:  # input/post-attention norms, q_norm/k_norm, model.norm
                p.copy_(1.0 + torch.randn(p.shape, generator=gen) * 0.1)
            else:
                raise RuntimeError(f"unexpected parameter {name} {tuple(p.shape)}")
    return model


def make_examples(seed, n):
    """n examples: length uniform in [3, 20], ids uniform in [0, 128); about half carry labels
    with the first k tokens (k in [1, len-2]) masked to -100, the others omit labels."""
    rng = random.Random(seed)
    examples = []
    for i in range(n):
        length = rng.randint(3, 20)
        ids = [rng.randrange(VOCAB) for _ in range(length)]
        ex = {"input_ids": ids}
        if i % 2 == 1:  # every other example carries explicit labels with a masked prompt prefix
            k = rng.randint(1, length - 2)
            ex["labels"] = [IGNORE] * k + ids[k:]
        examples.append(ex)
    return examples


def collate(examples):
    """Right-pad input_ids with 0 to the longest example, attention_mask 1 for real tokens,
    labels (= input_ids when absent) padded with -100."""
    longest = max(len(ex["input_ids"]) for ex in examples)
    input_ids, attention_mask, labels = [], [], []
    for ex in examples:
        ids = ex["input_ids"]
        lab = ex.get("labels", ids)
        pad = longest - len(ids)
        input_ids.append(ids + [PAD_ID] * pad)
        attention_mask.append([1] * len(ids) + [0] * pad)
        labels.append(lab + [IGNORE] * pad)
    return (
        torch.tensor(input_ids, dtype=torch.long),
        torch.tensor(attention_mask, dtype=torch.long),
        torch.tensor(labels, dtype=torch.long),
    )


def batch_loss(model, examples):
    input_ids, attention_mask, labels = collate(examples)
    # transformers' loss: mean over all non-ignored shifted targets of the whole batch.
    return model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss


# ----------------------------------------------------------------------------------------------
# LR schedule and training loop (the semantics MegaTrain must reproduce)
# ----------------------------------------------------------------------------------------------


def lr_factor(s, schedule, warmup, num_steps, min_lr_ratio):
    """s = number of scheduler steps taken so far (0 for the first optimizer step)."""
    if s < warmup:
        return s / max(1, warmup)
    progress = (s - warmup) / max(1, num_steps - warmup)
    if schedule == "constant":
        return 1.0
    if schedule == "linear":
        factor = max(0.0, 1.0 - progress)
    elif schedule == "cosine":
        factor = 0.5 * (1.0 + math.cos(math.pi * progress))
    else:
        raise ValueError(schedule)
    return min_lr_ratio + (1.0 - min_lr_ratio) * factor


def train(model, examples, t):
    bs, num_steps = t["batch_size"], t["num_steps"]
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": t["weight_decay"]},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=t["learning_rate"],
        betas=(t["beta1"], t["beta2"]),
        eps=t["eps"],
        foreach=False,
        fused=False,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: lr_factor(s, t["lr_scheduler"], t["warmup_steps"], num_steps, t["min_lr_ratio"]),
    )
    losses, grad_norms, lrs = [], [], []
    model.train()
    for step in range(num_steps):
        loss = batch_loss(model, examples[step * bs:(step + 1) * bs])
        loss.backward()
        if t["max_grad_norm"] > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), t["max_grad_norm"])
        else:  # no clipping, but the norm is still computed and recorded
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()], 2.0)
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
    return losses, grad_norms, lrs


# ----------------------------------------------------------------------------------------------
# Writers
# ----------------------------------------------------------------------------------------------


def write_json(path, obj, indent=2):
    path.write_text(json.dumps(obj, indent=indent) + "\n")


def yaml_scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)  # e.g. 0.001, 1e-08, 0.1
    if isinstance(v, int):
        return str(v)
    if v == "":
        return '""'
    return str(v)


def write_train_yaml(path, spec, t):
    sections = {
        "model": {
            "name": "model",
            "dtype": "float32",
            "attn_implementation": "eager",
            "trust_remote_code": False,
            "init": "pretrained",
        },
        "dataset": {
            "name": "fixture",
            "dataset_dir": "data",
            "max_seq_len": MAX_SEQ_LEN,
            "shuffle": False,
            "packing": False,
            "num_workers": 0,
            "template": "auto",
            "train_on_prompt": False,
        },
        "training": {
            "batch_size": t["batch_size"],
            "micro_batch_size": t["batch_size"],
            "gradient_accumulation_steps": 1,
            "num_steps": t["num_steps"],
            "learning_rate": t["learning_rate"],
            "lr_scheduler": t["lr_scheduler"],
            "warmup_steps": t["warmup_steps"],
            "min_lr_ratio": t["min_lr_ratio"],
            "weight_decay": t["weight_decay"],
            "max_grad_norm": t["max_grad_norm"],
            "checkpoint_interval": 1,
            "seed": spec["seed"],
            "output_dir": "output",
            "logging_steps": 1,
            "save_steps": 0,
            "save_total_limit": 0,
            "resume_from": "",
        },
        "optimizer": {
            "type": "adamw",
            "beta1": t["beta1"],
            "beta2": t["beta2"],
            "eps": t["eps"],
        },
    }
    lines = [f"# Golden fixture '{spec['case']}' (written by tools/make_fixtures.py; do not edit by hand)."]
    for section, kv in sections.items():
        lines.append(f"{section}:")
        for k, v in kv.items():
            lines.append(f"  {k}: {yaml_scalar(v)}")
    path.write_text("\n".join(lines) + "\n")


def make_case(spec):
    case = spec["case"]
    out = FIXTURES / case
    if out.exists():
        shutil.rmtree(out)
    (out / "model").mkdir(parents=True)
    (out / "data").mkdir()
    (out / "reference").mkdir()

    t = dict(COMMON_TRAINING, **spec["training"])
    n_examples = t["batch_size"] * t["num_steps"]
    examples = make_examples(spec["seed"], n_examples)

    # Initial model.
    model = build_model(spec)
    model.save_pretrained(out / "model", safe_serialization=True)
    (out / "model" / "generation_config.json").unlink(missing_ok=True)  # not part of the fixture
    step1_loss_before_rewrite = None
    if "old_rope_format" in spec:
        with torch.no_grad():
            step1_loss_before_rewrite = batch_loss(model, examples[: t["batch_size"]]).item()
        cfg_path = out / "model" / "config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg.pop("rope_parameters", None)
        cfg.update(spec["old_rope_format"])
        write_json(cfg_path, cfg)

    # Data.
    write_json(out / "data" / "dataset_info.json",
               {"fixture": {"file_name": "train.jsonl", "formatting": "tokenized"}})
    with open(out / "data" / "train.jsonl", "w") as f:
        for ex in examples:
            f.write(json.dumps(ex, separators=(",", ":")) + "\n")

    # Train.
    losses, grad_norms, lrs = train(model, examples, t)

    # Final parameters (state_dict drops tied duplicates the same way save_pretrained does).
    saved_keys = set(load_file(out / "model" / "model.safetensors").keys())
    final = {k: v.detach().to(torch.float32).contiguous().clone()
             for k, v in model.state_dict().items() if k in saved_keys}
    missing = saved_keys - set(final)
    if missing:
        raise RuntimeError(f"{case}: parameters missing from the final state: {sorted(missing)}")
    save_file(final, str(out / "reference" / "final.safetensors"), metadata={"format": "pt"})

    reference = {
        "case": case,
        "architecture": spec["model_cls"].__name__,
        "training": {k: t[k] for k in (
            "batch_size", "num_steps", "learning_rate", "lr_scheduler", "warmup_steps", "min_lr_ratio",
            "weight_decay", "max_grad_norm", "beta1", "beta2", "eps")},
        "losses": losses,
        "grad_norms": grad_norms,
        "lrs": lrs,
    }
    write_json(out / "reference.json", reference)
    write_train_yaml(out / "train.yaml", spec, t)
    return dict(examples=examples, t=t, reference=reference,
                step1_loss_before_rewrite=step1_loss_before_rewrite)


# ----------------------------------------------------------------------------------------------
# Sanity checks
# ----------------------------------------------------------------------------------------------


def check_case(spec, res):
    case, t, ref = spec["case"], res["t"], res["reference"]
    out = FIXTURES / case
    ok = True

    def report(cond, msg):
        nonlocal ok
        ok &= bool(cond)
        print(f"  [{'ok' if cond else 'FAIL'}] {msg}")

    print(f"{case} ({ref['architecture']}):")
    print(f"  losses     {ref['losses']}")
    print(f"  grad_norms {ref['grad_norms']}")
    print(f"  lrs        {ref['lrs']}")

    # 1. Reload the saved initial model and recompute the step-1 loss.
    model = AutoModelForCausalLM.from_pretrained(out / "model", dtype=torch.float32, attn_implementation="eager")
    with torch.no_grad():
        loss1 = batch_loss(model, res["examples"][: t["batch_size"]]).item()
    report(loss1 == ref["losses"][0], f"reloaded step-1 loss {loss1!r} == recorded {ref['losses'][0]!r}")
    if res["step1_loss_before_rewrite"] is not None:
        cfg = json.loads((out / "model" / "config.json").read_text())
        report("rope_parameters" not in cfg and "rope_scaling" in cfg and "rope_theta" in cfg,
               "config.json is in the old rope format (rope_theta + rope_scaling)")
        report(loss1 == res["step1_loss_before_rewrite"],
               f"old-format config loads to the same loss as the new format ({res['step1_loss_before_rewrite']!r})")
        report(model.config.rope_parameters.get("rope_type") == "llama3",
               f"reloaded rope_parameters = {model.config.rope_parameters}")

    # 2. Initial file contents: fp32, tied models have no lm_head.
    init = load_file(out / "model" / "model.safetensors")
    report(all(v.dtype == torch.float32 for v in init.values()), f"{len(init)} initial tensors, all fp32")
    tied = spec["config"].tie_word_embeddings
    report(("lm_head.weight" in init) != tied, f"tie_word_embeddings={tied}, lm_head.weight in file: {'lm_head.weight' in init}")
    final = load_file(out / "reference" / "final.safetensors")
    report(set(final) == set(init) and all(final[k].shape == init[k].shape for k in init),
           "final.safetensors has the same names/shapes as the initial weights")
    changed = sum(not torch.equal(final[k], init[k]) for k in init)
    report(changed == len(init), f"{changed}/{len(init)} tensors changed by training")

    # 3. Losses near ln(128) and changing.
    losses = ref["losses"]
    report(all(abs(l - math.log(VOCAB)) < 0.5 for l in losses), f"losses within 0.5 of ln(128)={math.log(VOCAB):.4f}")
    report(len(set(losses)) == len(losses), "losses differ from step to step")
    report(all(math.isfinite(g) and g > 0 for g in ref["grad_norms"]), "grad norms finite and positive")
    return ok


def cross_check_sdpa(spec):
    """Re-run the same training through a second, equally valid fp32 code path (torch SDPA attention
    instead of eager) and return (max relative loss difference, [(rel, tensor name)] sorted worst first).
    This estimates how far an exact fp32 reimplementation with a different summation order lands."""
    case = spec["case"]
    t = dict(COMMON_TRAINING, **spec["training"])
    examples = [json.loads(line) for line in open(FIXTURES / case / "data" / "train.jsonl")]
    model = build_model(spec)
    model.set_attn_implementation("sdpa")
    losses, _, _ = train(model, examples, t)
    ref = json.loads((FIXTURES / case / "reference.json").read_text())
    final = load_file(FIXTURES / case / "reference" / "final.safetensors")
    state = model.state_dict()
    rels = sorted((((state[k].double() - v.double()).norm() / v.double().norm()).item(), k) for k, v in final.items())
    loss_rel = max(abs(a - b) / abs(b) for a, b in zip(losses, ref["losses"]))
    return loss_rel, rels[::-1]


def write_readme(results):
    rows = []
    for spec in CASES:
        ref = results[spec["case"]]["reference"]
        tr = ref["training"]
        rows.append(f"| `{spec['case']}` | {tr['lr_scheduler']} | {tr['warmup_steps']} | "
                    f"{tr['min_lr_ratio']} | {tr['max_grad_norm']} | {ref['lrs']} |")
    xrows = []
    for spec in CASES:
        loss_rel, rels = results[spec["case"]]["sdpa"]
        worst = ", ".join(f"`{k}` {r:.1e}" for r, k in rels[:2])
        xrows.append(f"| `{spec['case']}` | {loss_rel:.1e} | {worst} |")
    text = f"""# Golden training fixtures

Written by `tools/make_fixtures.py` (run by hand, never by CI: `python3 tools/make_fixtures.py` from the
repository root). Generated with Python {sys.version.split()[0]}, torch {torch.__version__},
transformers {transformers.__version__}, safetensors {safetensors.__version__}, on CPU, one thread,
`torch.use_deterministic_algorithms(True)`, float32 throughout.

Every case is a tiny decoder-only model: vocab 128, hidden 32, intermediate 64, 3 layers,
max_position_embeddings 64, `attn_implementation` "eager", fp32. It is trained for 4 optimizer steps of
batch 4 (16 pre-tokenized examples, lengths 3..20, step k uses lines 4k..4k+3 of `data/train.jsonl`).

## Cases

| case | architecture | what it covers |
|---|---|---|
| `llama` | LlamaForCausalLM | 4 heads / 2 kv heads (GQA), untied lm_head, rms_norm_eps 1e-5, **llama3 rope scaling** (factor 8, low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 16, rope_theta 1e4). `config.json` is in the **old format** (top-level `rope_theta` + `rope_scaling`, no `rope_parameters`); transformers loads it to the identical loss. Cosine schedule with 1 warmup step (lr 0 on the first step) and min_lr_ratio 0.1, clipping at 1.0. |
| `qwen2` | Qwen2ForCausalLM | 4 heads / 1 kv head (MQA), **tied embeddings** (no `lm_head.weight` in either safetensors file), **q/k/v biases**, default rope with rope_theta 100 (see below), rms_norm_eps 1e-6. Linear schedule, no warmup, min_lr_ratio 0, clipping at 1.0. |
| `qwen3` | Qwen3ForCausalLM | 4 heads / 2 kv heads, **explicit head_dim 16** (q_proj is 64x32, o_proj 32x64), **qk-norm** (`q_norm`/`k_norm` RMSNorm over head_dim, applied before rope), untied, **linear rope scaling** (factor 2, rope_theta 1e4). Constant schedule with 2 warmup steps (lrs 0, 0.5e-3, 1e-3, 1e-3), **max_grad_norm 0: no clipping**, but the grad norm is still computed and recorded. |
| `mistral` | MistralForCausalLM | 4 heads / 2 kv heads, untied, **sliding_window 5** (query i sees keys j with i-5 < j <= i), **yarn rope** (factor 4, original_max_position_embeddings 16, rope_theta 1e4; beta_fast 32 / beta_slow 1 defaults; attention_factor 0.1*ln(4)+1 multiplies both cos and sin). Cosine schedule, no warmup, min_lr_ratio 0, clipping at 1.0. |

| case | lr_scheduler | warmup_steps | min_lr_ratio | max_grad_norm | lrs used by steps 1..4 |
|---|---|---|---|---|---|
{chr(10).join(rows)}

All cases: learning_rate 1e-3, AdamW (betas 0.9/0.999, eps 1e-8), weight_decay 0.1 on parameters with
ndim >= 2 and 0 on 1-D parameters (norm weights, biases).

Initial weights: the model is constructed under `torch.manual_seed(seed)` (seeds 1..4 in case order),
then every 2-D matrix (embeddings, projections, lm_head) is set to normal(0, 0.05), every bias to
normal(0, 0.05), every norm weight (layer norms, q_norm/k_norm, model.norm) to 1 + normal(0, 0.1).
About half the examples (every odd line) carry `labels` whose first k tokens (1 <= k <= len-2) are -100;
the others omit `labels` (labels = input_ids).

## Files per case

- `model/config.json`, `model/model.safetensors`: the initial fp32 weights (`save_pretrained`).
- `data/dataset_info.json` (`{{"fixture": {{"file_name": "train.jsonl", "formatting": "tokenized"}}}}`),
  `data/train.jsonl`.
- `reference.json`: the hyper-parameters plus per-step `losses`, `grad_norms` (total L2 norm of all
  gradients before clipping) and `lrs` (the lr used by that step's optimizer update).
- `reference/final.safetensors`: every parameter after the last step (fp32, HF names, no lm_head when tied).
- `train.yaml`: the MegaTrain config for the same run (relative `model.name: model`,
  `dataset.dataset_dir: data`, `training.output_dir: output`; the tests override them with absolute paths).

## Reference semantics (see `train()` in the script)

Per step: right-pad `input_ids` with 0 to the longest example of the batch, attention_mask 1 on real
tokens, labels padded with -100; loss = transformers' causal-LM loss (labels shifted left by one, mean
over all non-ignored targets of the whole batch); backward; `clip_grad_norm_(params, max_grad_norm)`
(or the plain total norm when max_grad_norm <= 0); record lr; `AdamW.step()` (torch's decoupled
weight decay: p *= 1 - lr*wd, then the Adam update with bias correction); `LambdaLR.step()`.
LR factor at scheduler step s (0 for the first update): s < warmup: s / max(1, warmup); else
progress = (s - warmup) / max(1, num_steps - warmup) and constant: 1, linear: max(0, 1 - progress),
cosine: 0.5 (1 + cos(pi progress)); linear and cosine then map f -> min_lr_ratio + (1 - min_lr_ratio) f.

Details that a reimplementation must match exactly (all checked against transformers {transformers.__version__}):

- Sliding window (`mistral`, `masking_utils.sliding_window_overlay` AND `causal_mask_function`): query i
  sees key j iff `j <= i and j > i - sliding_window`, i.e. keys i-4..i (5 keys, self included) for
  sliding_window 5. Padding keys are masked as well. With right padding, some pad query rows see only pad
  keys (fully masked rows, e.g. step 1 pads a length-4 example to 15); eager attention adds
  finfo(float32).min there, giving a uniform (finite) softmax; those rows only feed ignored labels, so
  they must simply not produce NaN (their gradients are exactly zero).
- RoPE (`modeling_rope_utils.py`), rotate-half convention, positions 0..T-1 per example:
  - llama3: inv_freq = theta^(-2i/d); wavelen = 2 pi / inv_freq; wavelen > orig/low_freq_factor (16):
    inv_freq / factor; wavelen < orig/high_freq_factor (4): unchanged; otherwise
    (1 - s) inv_freq / factor + s inv_freq with s = (orig / wavelen - low) / (high - low).
    Here inv_freq = [0.57606, 0.0125, 0.00125, 0.000125] (pair 0 smoothed, the rest divided by 8).
  - linear (`qwen3`): inv_freq / factor.
  - yarn (`mistral`): beta_fast 32, beta_slow 1, truncate true: low = max(floor(d ln(orig/(32*2 pi)) /
    (2 ln theta)), 0), high = min(ceil(d ln(orig/(1*2 pi)) / (2 ln theta)), d - 1) (here 0 and 1);
    ramp_i = clamp((i - low) / (high - low), 0, 1) over i < d/2; inv_freq = (theta^(-2i/d) / factor) ramp_i
    + theta^(-2i/d) (1 - ramp_i) = [1, 0.025, 0.0025, 0.00025]. attention_factor = 0.1 ln(factor) + 1 =
    1.1386294 (no mscale keys) multiplies BOTH cos and sin, so q.k logits are scaled by its square; the
    softmax scale stays 1/sqrt(head_dim).
- `qwen3` applies q_norm/k_norm (RMSNorm over head_dim, eps 1e-6) per head before rope.
- `clip_grad_norm_` scales by max_norm / (total_norm + 1e-6) when that is < 1.
- The first optimizer step of `llama` and `qwen3` has lr 0 (warmup from 0): parameters do not move, but
  AdamW's moments and step count do advance.

## Tolerances used by the C++ tests

- Per-step loss: relative error <= 1e-4 against `reference.json` `losses`.
- Final weights: for each tensor, ||ours - ref|| / ||ref|| <= 1e-4 against `reference/final.safetensors`.

How much room that leaves: the generator re-runs every case with torch SDPA attention instead of eager
(an equally exact fp32 path with another summation order) and compares with the reference:

| case | max loss rel diff | worst final tensors (rel diff) |
|---|---|---|
{chr(10).join(xrows)}

Why `qwen2` uses rope_theta 100: a `k_proj.bias` gradient is zero up to rounding where rope does not
rotate (softmax is invariant to adding the same vector to every key). With Qwen2's usual 1e6 and at most
20 positions the slow rotary pairs barely turn, and Adam's normalisation turns fp32 rounding noise into
visible update differences (1.6e-4 between two exact fp32 code paths). Theta 100 rotates every pair, so
every tensor's reference is well conditioned.
"""
    (FIXTURES / "README.md").write_text(text)


def main():
    FIXTURES.mkdir(parents=True, exist_ok=True)
    results = {}
    for spec in CASES:
        print(f"generating {spec['case']} ...", flush=True)
        results[spec["case"]] = make_case(spec)

    print("\nsanity checks:")
    all_ok = True
    for spec in CASES:
        all_ok &= check_case(spec, results[spec["case"]])

    print("\ncross-check: the same run with torch SDPA attention instead of eager (fp32):")
    for spec in CASES:
        loss_rel, rels = cross_check_sdpa(spec)
        results[spec["case"]]["sdpa"] = (loss_rel, rels)
        worst = ", ".join(f"{k} {r:.1e}" for r, k in rels[:3])
        print(f"  {spec['case']:8s} max loss rel diff {loss_rel:.1e}; worst tensors: {worst}")
    write_readme(results)
    du = subprocess.run(["du", "-sh", str(FIXTURES)], capture_output=True, text=True).stdout.strip()
    size = sum(f.stat().st_size for f in FIXTURES.rglob("*") if f.is_file())
    print(f"\nfixture size: {du}  ({size} bytes)")
    if size >= 2 * 1024 * 1024:
        print("  [FAIL] fixtures exceed 2 MB")
        all_ok = False
    print("ALL CHECKS PASSED" if all_ok else "SOME CHECKS FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
