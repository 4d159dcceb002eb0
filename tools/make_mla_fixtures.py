#!/usr/bin/env python3
"""Write the multi-head latent attention golden training fixtures under tests/fixtures/ (run by hand, never by CI).

Usage, from the repository root (the Python of tools/make_fixtures.py: torch 2.x, transformers 5.x, CPU only):

    python3 tools/make_mla_fixtures.py                 # every latent-attention case
    python3 tools/make_mla_fixtures.py deepseek_v3     # only the named cases

Each case is written like tools/make_moe_fixtures.py's (model/, data/, reference.json, reference/final.safetensors,
train.yaml; its model builder, training loop and routing notes are imported from there), plus
reference/final_fp64.safetensors: the same run trained by PyTorch in float64 end to end (make_fixtures.fp64_run) from the
same initial weights and data, its final weights as F64 under the same names (reference.json "fp64").

Models are tiny (hidden 32, 3 layers, 4 heads; latent rank 16, q/k head dims 8 no-rope + 8 rope, values of 12 where
the case says so; 8 experts of width 12). The sequences of the deepseek_v3 case run up to 150 tokens, longer than one
attention tile of the CUDA kernels, in padded batches.
"""

import copy
import json
import random
import shutil
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402  (sets torch threads and determinism)
import make_moe_fixtures as moe  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import (  # noqa: E402
    DeepseekV2Config,
    DeepseekV2ForCausalLM,
    DeepseekV3Config,
    DeepseekV3ForCausalLM,
    Glm4MoeLiteConfig,
    Glm4MoeLiteForCausalLM,
)

LONG_MAX_SEQ_LEN = 160  # dataset.max_seq_len of the long-sequence case

MLA_MODEL = dict(
    mf.COMMON_MODEL,
    intermediate_size=32,
    num_attention_heads=4,
    num_key_value_heads=4,
    kv_lora_rank=16,
    qk_nope_head_dim=8,
    qk_rope_head_dim=8,
    v_head_dim=12,
    tie_word_embeddings=False,
    n_routed_experts=8,
    num_experts_per_tok=3,
    moe_intermediate_size=12,
)

CASES = [
    dict(
        case="deepseek_v3",
        seed=41,
        model_cls=DeepseekV3ForCausalLM,
        # Low-rank query, interleaved rope pairs, YaRN ×4 with mscale 1 / mscale_all_dim 0.8 (cos/sin × their ratio,
        # softmax scale × mscale_all_dim's mscale²); layer 0 dense, 1 and 2 sparse under noaux_tc.
        config=DeepseekV3Config(
            **dict(MLA_MODEL, max_position_embeddings=LONG_MAX_SEQ_LEN),
            q_lora_rank=12,
            rms_norm_eps=1e-6,
            rope_interleave=True,
            n_group=4,
            topk_group=2,
            routed_scaling_factor=2.5,
            n_shared_experts=1,
            first_k_dense_replace=1,
            norm_topk_prob=True,
            rope_parameters={"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0, "mscale": 1.0,
                             "mscale_all_dim": 0.8, "original_max_position_embeddings": 40},
        ),
        score_bias=0.3,
        long=True,
        training=dict(lr_scheduler="cosine", warmup_steps=1, min_lr_ratio=0.1, max_grad_norm=1.0),
        what="**MLA**: `q_lora_rank` 12 (q_a_proj → q_a_layernorm → q_b_proj), `kv_lora_rank` 16, q/k head 8 + 8 "
             "(**rope interleaved**), **values of 12**; **YaRN** ×4 with `mscale` 1 / `mscale_all_dim` 0.8 (softmax "
             "scale × mscale²); `first_k_dense_replace` 1, 8 experts of 12 in 4 groups (best 2), top 3 by sigmoid + "
             "`e_score_correction_bias` (±0.3), renormalised × 2.5, one shared expert; **sequences up to 150 tokens** "
             "(longer than a CUDA attention tile), padded batches",
    ),
    dict(
        case="glm4_moe_lite",
        seed=42,
        model_cls=Glm4MoeLiteForCausalLM,
        # q/k head 8 + 8 and values of 16 (equal dims, as GLM-4.7-Flash's 192 + 64 / 256), rotate_half rope pairs,
        # biases on q_a_proj, kv_a_proj_with_mqa and o_proj, mlp_layer_types dense / sparse / dense, one group.
        config=Glm4MoeLiteConfig(
            **dict(MLA_MODEL, v_head_dim=16),
            q_lora_rank=12,
            rms_norm_eps=1e-5,
            rope_interleave=False,
            attention_bias=True,
            n_group=1,
            topk_group=1,
            routed_scaling_factor=1.8,
            n_shared_experts=2,
            mlp_layer_types=["dense", "sparse", "dense"],
            norm_topk_prob=True,
            rope_parameters={"rope_type": "default", "rope_theta": 100.0},
        ),
        score_bias=0.3,
        training=dict(lr_scheduler="linear", warmup_steps=0, min_lr_ratio=0.0, max_grad_norm=1.0),
        what="GLM-4.7-Flash's MLA with `q_lora_rank` 12, q/k head 8 + 8 = values of 16, **rotate_half rope pairs** "
             "(`rope_interleave` false), **`attention_bias`** (q_a_proj, kv_a_proj_with_mqa, o_proj); "
             "**`mlp_layer_types`** dense, sparse, dense; 8 experts of 12, one group, top 3 by sigmoid + bias, "
             "renormalised × 1.8, **two shared experts** (one MLP of 24)",
    ),
    dict(
        case="deepseek_v2",
        seed=43,
        model_cls=DeepseekV2ForCausalLM,
        # q_proj (q_lora_rank null, as V2-Lite), softmax router group_limited_greedy: 8 experts in 4 groups, the best
        # 2 by their largest probability, top 3, × 2.0, not renormalised; two shared experts; layer 0 dense.
        config=DeepseekV2Config(
            **MLA_MODEL,
            q_lora_rank=None,
            rms_norm_eps=1e-6,
            topk_method="group_limited_greedy",
            n_group=4,
            topk_group=2,
            routed_scaling_factor=2.0,
            n_shared_experts=2,
            first_k_dense_replace=1,
            norm_topk_prob=False,
            rope_parameters={"rope_type": "default", "rope_theta": 100.0},
        ),
        training=dict(lr_scheduler="cosine", warmup_steps=1, min_lr_ratio=0.1, max_grad_norm=1.0),
        what="DeepSeek-V2's MLA with **`q_lora_rank` null (q_proj)**, q/k head 8 + 8 (complex = interleaved rope), "
             "values of 12; **softmax router `group_limited_greedy`** (8 experts in 4 groups, the best 2 by their "
             "largest probability), top 3, not renormalised, **× `routed_scaling_factor` 2.0**; two shared experts; "
             "layer 0 dense",
    ),
    dict(
        case="deepseek_v2_lora",
        seed=44,
        model_cls=DeepseekV2ForCausalLM,
        # Low-rank query, greedy softmax top 3 of 8, × 1.0, every layer sparse, one shared expert.
        config=DeepseekV2Config(
            **MLA_MODEL,
            q_lora_rank=12,
            rms_norm_eps=1e-6,
            topk_method="greedy",
            routed_scaling_factor=1.0,
            n_shared_experts=1,
            first_k_dense_replace=0,
            norm_topk_prob=False,
            rope_parameters={"rope_type": "default", "rope_theta": 100.0},
        ),
        training=dict(lr_scheduler="linear", warmup_steps=0, min_lr_ratio=0.0, max_grad_norm=1.0),
        what="DeepSeek-V2's MLA with **`q_lora_rank` 12**; **softmax router `greedy`** top 3 of 8, not renormalised; "
             "**every layer sparse** (`first_k_dense_replace` 0), one shared expert",
    ),
]


def long_examples(seed, n):
    """n examples of 3 to 150 tokens (every batch of 4 holds one longer than 100), ids uniform in [0, 128); every
    other one carries labels with a masked prompt prefix."""
    rng = random.Random(seed)
    examples = []
    for i in range(n):
        length = rng.randint(101, 150) if i % 4 == 0 else rng.randint(3, 60)
        ids = [rng.randrange(mf.VOCAB) for _ in range(length)]
        ex = {"input_ids": ids}
        if i % 2 == 1:
            k = rng.randint(1, length - 2)
            ex["labels"] = [mf.IGNORE] * k + ids[k:]
        examples.append(ex)
    return examples


def final_state(model, directory):
    """The model's weights as save_pretrained writes them (the checkpoint's names and experts), read back."""
    model.save_pretrained(directory, safe_serialization=True)
    state = load_file(directory / "model.safetensors")
    shutil.rmtree(directory)
    return state


def make_case(spec):
    case = spec["case"]
    out = mf.FIXTURES / case
    if out.exists():
        shutil.rmtree(out)
    for d in ("model", "data", "reference"):
        (out / d).mkdir(parents=True)
    t = dict(mf.COMMON_TRAINING, **spec["training"])
    n = t["batch_size"] * t["num_steps"]
    examples = long_examples(spec["seed"], n) if spec.get("long") else mf.make_examples(spec["seed"], n)
    model = moe.build_model(spec)
    initial = copy.deepcopy(model)
    model.save_pretrained(out / "model", safe_serialization=True)
    (out / "model" / "generation_config.json").unlink(missing_ok=True)
    saved_keys = set(load_file(out / "model" / "model.safetensors").keys())
    mf.write_json(out / "data" / "dataset_info.json", {"fixture": {"file_name": "train.jsonl", "formatting": "tokenized"}})
    with open(out / "data" / "train.jsonl", "w") as f:
        for ex in examples:
            f.write(json.dumps(ex, separators=(",", ":")) + "\n")
    notes = moe.routing_notes(model, examples, t)
    losses, _, grad_norms, lrs = moe.train(model, examples, t, False)
    final = final_state(model, out / "reference" / "final")
    if set(final) != saved_keys:
        raise RuntimeError(f"{case}: final tensors differ from the initial ones' names")
    save_file(final, str(out / "reference" / "final.safetensors"), metadata={"format": "pt"})
    losses64 = mf.fp64_run(initial, lambda m: moe.train(m, examples, t, False)[0])
    final64 = final_state(initial, out / "reference" / "final64")
    if set(final64) != saved_keys:
        raise RuntimeError(f"{case}: the float64 run's final tensors differ from the initial ones' names")
    reference = {
        "case": case,
        "architecture": spec["model_cls"].__name__,
        "training": {k: t[k] for k in ("batch_size", "num_steps", "learning_rate", "lr_scheduler", "warmup_steps",
                                       "min_lr_ratio", "weight_decay", "max_grad_norm", "beta1", "beta2", "eps")},
        "losses": losses,
        "aux_losses": [],
        "aux_coef": 0.0,
        "grad_norms": grad_norms,
        "lrs": lrs,
        "notes": notes,
        "fp64": mf.write_fp64_reference(out, final64, losses64),
    }
    mf.write_json(out / "reference.json", reference)
    mf.write_train_yaml(out / "train.yaml", spec, t)
    text = (out / "train.yaml").read_text().replace("tools/make_fixtures.py", "tools/make_mla_fixtures.py")
    if spec.get("long"):
        text = text.replace(f"max_seq_len: {mf.MAX_SEQ_LEN}\n", f"max_seq_len: {LONG_MAX_SEQ_LEN}\n")
    (out / "train.yaml").write_text(text)
    size = max(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"  {case}: losses {losses}, float64 {losses64}, notes {notes}, largest file {size} B")
    return reference


def write_readme():
    rows = "\n".join(f"| `{s['case']}` | {s['model_cls'].__name__} | {s['what']} |" for s in CASES)
    (mf.FIXTURES / "README_mla.md").write_text(f"""# Multi-head latent attention golden fixtures

Written by `tools/make_mla_fixtures.py` (run by hand; model construction, training loop and routing notes are
`tools/make_moe_fixtures.py`'s, data and train.yaml `tools/make_fixtures.py`'s), with torch {torch.__version__},
transformers {mf.transformers.__version__}, fp32, one thread, eager attention. Vocab 128, hidden 32, 3 layers,
4 heads; 4 AdamW steps of batch 4. `reference/final_fp64.safetensors` holds the same run trained in float64 end to end.

| case | architecture | what it covers |
|---|---|---|
{rows}
""")


def main():
    names = [s["case"] for s in CASES]
    wanted = sys.argv[1:] or names
    for name in wanted:
        if name not in names:
            sys.exit(f"unknown case {name}; cases: {', '.join(names)}")
    for spec in CASES:
        if spec["case"] in wanted:
            print(f"generating {spec['case']} ...", flush=True)
            make_case(spec)
    write_readme()
    return 0


if __name__ == "__main__":
    sys.exit(main())
