#!/usr/bin/env python3
"""Write the mixture-of-experts golden training fixtures under tests/fixtures/ (run by hand, never by CI).

Usage, from the repository root (the Python of tools/make_fixtures.py: torch 2.x, transformers 5.x, CPU only):

    python3 tools/make_moe_fixtures.py                 # every MoE case
    python3 tools/make_moe_fixtures.py qwen2_moe       # only the named cases

Each case is written like tools/make_fixtures.py's (model/, data/, reference.json, reference/final.safetensors,
reference/final_fp64.safetensors: the same run in float64 with transformers' eager experts, train.yaml; its data, schedule helpers, training-yaml writer and semantics are imported from there), plus per step
the router load-balancing loss in reference.json "aux_losses" (transformers' outputs.aux_loss; the recorded
"losses" are outputs.loss = LM loss + router_aux_loss_coef × aux loss where the aux loss is on) and "notes": the
routing facts the case is meant to exercise, checked here (an expert that receives no token of some sequence,
which a micro_batch_size 1 run meets as an expert with no rows; dense and sparse layers mixed).

Experts are tiny (hidden 32, 4 experts of width 24, top 2; GPT-OSS's of width 32, which MXFP4's 32-input blocks
need) and the router weights are scaled ×8 at init so that routing is uneven. The gpt_oss_mxfp4 case writes its
checkpoint's experts in MXFP4 (quantised here, dequantised by transformers' own convert_moe_packed_tensors to the
values the reference trains from).
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402  (sets torch threads and determinism)
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import (  # noqa: E402
    Glm4MoeConfig,
    Glm4MoeForCausalLM,
    Llama4ForCausalLM,
    Llama4TextConfig,
    GptOssConfig,
    GptOssForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
    Qwen2MoeConfig,
    Qwen2MoeForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

MOE_MODEL = dict(mf.COMMON_MODEL, intermediate_size=48)

# GPT-OSS: 4 heads of 8 over 2 kv heads, q/k/v/o biases, sinks, experts of width 32 (MXFP4 needs inputs in blocks of
# 32), swiglu_limit 0.3 so that the clamps of the SwiGLU hold a good share of the gate and up values, YaRN ×4 over 16
# positions (truncate false, GPT-OSS's), sliding window 4 (shorter than most sequences).
GPT_OSS_MODEL = dict(
    mf.COMMON_MODEL,
    intermediate_size=32,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
    num_local_experts=4,
    num_experts_per_tok=2,
    sliding_window=4,
    swiglu_limit=0.3,
    rope_parameters={"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                     "truncate": False, "original_max_position_embeddings": 16},
)

CASES = [
    dict(
        case="mixtral",
        seed=21,
        model_cls=MixtralForCausalLM,
        # Every layer sparse; the router loss on from config.json (output_router_logits) with coefficient 0.05.
        config=MixtralConfig(
            **dict(MOE_MODEL, intermediate_size=24),
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            num_local_experts=4,
            num_experts_per_tok=2,
            output_router_logits=True,
            router_aux_loss_coef=0.05,
            rope_parameters={"rope_type": "default", "rope_theta": 100.0},
        ),
        training=dict(lr_scheduler="cosine", warmup_steps=0, min_lr_ratio=0.0, max_grad_norm=1.0),
        what="every layer sparse: 4 experts (w1/w3/w2 of width 24) under `block_sparse_moe`, softmax top 2 "
             "renormalised; **router loss on from config.json** (`output_router_logits` true, "
             "`router_aux_loss_coef` 0.05); untied, rope_theta 100",
    ),
    dict(
        case="qwen2_moe",
        seed=22,
        model_cls=Qwen2MoeForCausalLM,
        # decoder_sparse_step 2: layer 1 sparse, layers 0 and 2 dense MLPs of width 48. The reference trains with
        # the router loss at coefficient 0.02; config.json says output_router_logits false and coefficient 0.001,
        # and train.yaml's training.moe_aux_loss_coef 0.02 turns it on and overrides the coefficient.
        config=Qwen2MoeConfig(
            **MOE_MODEL,
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-6,
            tie_word_embeddings=False,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=24,
            shared_expert_intermediate_size=40,
            decoder_sparse_step=2,
            norm_topk_prob=False,
            output_router_logits=True,
            router_aux_loss_coef=0.02,
            rope_parameters={"rope_type": "default", "rope_theta": 100.0},
        ),
        config_json_overrides=dict(output_router_logits=False, router_aux_loss_coef=0.001),
        train_yaml_training=dict(moe_aux_loss_coef=0.02),
        training=dict(lr_scheduler="linear", warmup_steps=0, min_lr_ratio=0.0, max_grad_norm=1.0),
        what="`decoder_sparse_step` 2 (**layer 1 sparse, layers 0 and 2 dense** MLPs of 48), 4 experts of 24, "
             "softmax top 2 **not renormalised**, **shared expert** of 40 scaled by sigmoid(`shared_expert_gate`), "
             "qkv bias; config.json has `output_router_logits` false and coefficient 0.001: **train.yaml's "
             "`training.moe_aux_loss_coef` 0.02 turns the router loss on and overrides the coefficient**",
    ),
    dict(
        case="qwen3_moe",
        seed=23,
        model_cls=Qwen3MoeForCausalLM,
        # mlp_only_layers [2]: layers 0 and 1 sparse, layer 2 dense. Router loss off.
        config=Qwen3MoeConfig(
            **dict(MOE_MODEL, intermediate_size=32),
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            rms_norm_eps=1e-6,
            tie_word_embeddings=False,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=24,
            mlp_only_layers=[2],
            norm_topk_prob=True,
            output_router_logits=False,
            rope_parameters={"rope_type": "default", "rope_theta": 100.0},
        ),
        training=dict(lr_scheduler="constant", warmup_steps=1, min_lr_ratio=0.0, max_grad_norm=1.0),
        what="`mlp_only_layers` [2] (**layers 0, 1 sparse, layer 2 dense** MLP of 32), 4 experts of 24, softmax top 2 "
             "renormalised (`norm_topk_prob`), q/k norm, head_dim 16; **router loss off**",
    ),
    dict(
        case="glm4_moe",
        seed=24,
        model_cls=Glm4MoeForCausalLM,
        # first_k_dense_replace 1: layer 0 dense, layers 1 and 2 sparse. 8 experts in 4 groups, the best 2 groups,
        # top 3; sigmoid scores with e_score_correction_bias (a trained-never buffer, set ±0.3 so that it changes
        # choices), renormalised, × 2.5; one shared expert. Router loss: none in transformers for this family.
        config=Glm4MoeConfig(
            **dict(MOE_MODEL, intermediate_size=32),
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            attention_bias=True,
            use_qk_norm=True,
            n_routed_experts=8,
            num_experts_per_tok=3,
            moe_intermediate_size=12,
            n_group=4,
            topk_group=2,
            routed_scaling_factor=2.5,
            n_shared_experts=1,
            first_k_dense_replace=1,
            norm_topk_prob=True,
            rope_parameters={"rope_type": "default", "rope_theta": 100.0, "partial_rotary_factor": 0.5},
        ),
        score_bias=0.3,
        training=dict(lr_scheduler="cosine", warmup_steps=1, min_lr_ratio=0.1, max_grad_norm=1.0),
        what="`first_k_dense_replace` 1 (**layer 0 dense** MLP of 32, layers 1, 2 sparse), 8 experts of 12 in "
             "**4 groups, the best 2 (`n_group`, `topk_group`)**, top 3 by **sigmoid scores + "
             "`e_score_correction_bias`** (a buffer set to ±0.3, never trained), unbiased weights renormalised "
             "× **`routed_scaling_factor` 2.5**, **one shared expert** (`n_shared_experts`), q/k norm, qkv bias, "
             "partial rotary 0.5 (rotate_half); no router loss (transformers has none for it)",
    ),
    dict(
        case="gpt_oss",
        seed=25,
        model_cls=GptOssForCausalLM,
        # layer_types sliding, full, sliding; router loss on from config.json with coefficient 0.05.
        config=GptOssConfig(
            **GPT_OSS_MODEL,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            output_router_logits=True,
            router_aux_loss_coef=0.05,
        ),
        training=dict(lr_scheduler="cosine", warmup_steps=1, min_lr_ratio=0.0, max_grad_norm=1.0),
        what="**attention sinks**, q/k/v/o biases, `layer_types` sliding (window 4), full, sliding, **YaRN** ×4 "
             "(truncate false); 4 experts of 32 with biases, interleaved `gate_up_proj`, **clamped SwiGLU** (alpha "
             "1.702, limit 0.3), router with bias, **softmax over the top 2 logits**; **router loss on** from "
             "config.json (coefficient 0.05)",
    ),
    dict(
        case="gpt_oss_mxfp4",
        seed=26,
        model_cls=GptOssForCausalLM,
        # The checkpoint's experts in MXFP4 (the weights quantised first, so the reference trains from exactly the
        # values the blocks hold); layer_types full, sliding, full; router loss off.
        config=GptOssConfig(
            **GPT_OSS_MODEL,
            layer_types=["full_attention", "sliding_attention", "full_attention"],
            output_router_logits=False,
        ),
        mxfp4=True,
        training=dict(lr_scheduler="linear", warmup_steps=0, min_lr_ratio=0.0, max_grad_norm=1.0),
        what="the GPT-OSS model above with **experts stored in MXFP4** (`*_blocks` U8 [E, out, in/32, 16], "
             "`*_scales` U8 [E, out, in/32], `quantization_config` mxfp4), dequantised on load; `layer_types` full, "
             "sliding, full; **router loss off**",
    ),
]


# Llama 4: 4 layers, layers 0-2 RoPE (llama3-scaled, interleaved pairs) with q/k L2 norm in chunks of 8 positions,
# layer 3 NoPE full attention with temperature tuning (floor_scale 2, attn_scale 2, so that it varies widely within the
# 20-token examples); interleave_moe_layer_step 2: layers 1 and 3 MoE (4 experts of 24 + a shared expert of 24),
# layers 0 and 2 dense MLPs of intermediate_size_mlp 48. Sequences run to 20 tokens: past two chunk boundaries.
LLAMA4_MODEL = dict(
    {k: v for k, v in mf.COMMON_MODEL.items() if k != "intermediate_size"},
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
    intermediate_size=24,
    intermediate_size_mlp=48,
    num_local_experts=4,
    interleave_moe_layer_step=2,
    attention_chunk_size=8,
    attn_temperature_tuning=True,
    floor_scale=2,
    attn_scale=2.0,
    use_qk_norm=True,
    rope_parameters={"rope_type": "llama3", "rope_theta": 100.0, "factor": 2.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 16},
)
PACKED_MAX_SEQ_LEN = 48  # dataset.max_seq_len of the packed case

CASES += [
    dict(
        case="llama4",
        seed=25,
        model_cls=Llama4ForCausalLM,
        config=Llama4TextConfig(**LLAMA4_MODEL, num_experts_per_tok=1),
        training=dict(lr_scheduler="cosine", warmup_steps=1, min_lr_ratio=0.1, max_grad_norm=1.0),
        what="Llama4ForCausalLM: layers 0-2 **chunked attention** (`attention_chunk_size` 8; sequences to 20 tokens) "
             "with llama3-scaled **interleaved-pair RoPE** and **weightless q/k L2 norm**, layer 3 **NoPE** full "
             "attention with **temperature tuning** (`floor_scale` 2, `attn_scale` 2); `interleave_moe_layer_step` "
             "2 (**layers 1, 3 MoE**: 4 experts of 24 in the fused `gate_up_proj` [E, H, 2I] / `down_proj` [E, I, H], "
             "**sigmoid top 1 scaling the expert's input**, a shared expert of 24; layers 0, 2 dense MLPs of "
             "`intermediate_size_mlp` 48); no router loss (transformers has none for it)",
    ),
    dict(
        case="llama4_packed",
        seed=26,
        model_cls=Llama4ForCausalLM,
        config=Llama4TextConfig(**LLAMA4_MODEL, num_experts_per_tok=2),
        packing=True,
        training=dict(lr_scheduler="linear", warmup_steps=0, min_lr_ratio=0.0, max_grad_norm=1.0),
        what="the llama4 model with **top 2** (both selected experts' inputs scaled by their sigmoids) and "
             f"`dataset.packing` true (`max_seq_len` {PACKED_MAX_SEQ_LEN}): several examples per sequence, chunks "
             "counted from each example's start (its position ids), the temperature from the row index (transformers' "
             "arange over the sequence); the reference runs the packed rows with position ids and no attention mask",
    ),
]


def llama4_packed_batches(spec, examples, t):
    """The packed case's steps: make_hybrid_fixtures.pack's sequences (MegaTrain's greedy knapsack), batch_size a
    step, as rows of input ids, position ids restarting per example, labels (each example's first token -100: no
    target crosses an example boundary) and right padding (its own positions 0.., labels -100)."""
    import make_hybrid_fixtures as hf
    sequences = hf.pack(examples, PACKED_MAX_SEQ_LEN)
    bs = t["batch_size"]
    if len(sequences) != bs * t["num_steps"]:
        raise RuntimeError(f"{spec['case']}: {len(examples)} examples pack into {len(sequences)} sequences, "
                           f"need {bs * t['num_steps']}")
    steps = []
    for k in range(t["num_steps"]):
        rows = []
        for seq in sequences[k * bs:(k + 1) * bs]:
            ids, pos, lab = [], [], []
            for i in seq:
                ex = examples[i]
                ids += ex["input_ids"]
                pos += list(range(len(ex["input_ids"])))
                lab += [mf.IGNORE] + list(ex.get("labels", ex["input_ids"]))[1:]
            rows.append((ids, pos, lab))
        longest = max(len(r[0]) for r in rows)
        pad = [longest - len(r[0]) for r in rows]
        steps.append(dict(
            input_ids=torch.tensor([r[0] + [mf.PAD_ID] * p for r, p in zip(rows, pad)]),
            position_ids=torch.tensor([r[1] + list(range(p)) for r, p in zip(rows, pad)]),
            labels=torch.tensor([r[2] + [mf.IGNORE] * p for r, p in zip(rows, pad)])))
    return steps


def llama4_examples(spec, t):
    """mf.make_examples, enough of them (packed case) to fill exactly batch_size × num_steps packed sequences."""
    if not spec.get("packing"):
        return mf.make_examples(spec["seed"], t["batch_size"] * t["num_steps"])
    import make_hybrid_fixtures as hf
    need = t["batch_size"] * t["num_steps"]
    for n in range(need, 40 * need):
        examples = mf.make_examples(spec["seed"], n)
        if len(hf.pack(examples, PACKED_MAX_SEQ_LEN)) == need:
            return examples
    raise RuntimeError(f"{spec['case']}: no example count packs into exactly {need} sequences")


def build_model(spec):
    """torch.manual_seed(seed) construction, then every parameter perturbed (mf.build_model's rules, plus the 3-D
    expert tensors); router weights ×8 so that routing is uneven."""
    torch.manual_seed(spec["seed"])
    config = spec["config"]
    config._attn_implementation = "eager"
    model = spec["model_cls"](config).to(torch.float32)
    gen = torch.Generator().manual_seed(1000 + spec["seed"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim in (2, 3) or name.endswith(".bias"):
                value = torch.randn(p.shape, generator=gen) * 0.05
            elif name.endswith("self_attn.sinks"):  # GPT-OSS: sinks comparable to the logits
                value = torch.randn(p.shape, generator=gen) * 0.5
            elif p.ndim == 1 and "norm" in name:
                value = 1.0 + torch.randn(p.shape, generator=gen) * 0.1
            else:
                raise RuntimeError(f"unexpected parameter {name} {tuple(p.shape)}")
            if (name.endswith("gate.weight") and "shared_expert_gate" not in name) or name.endswith("mlp.router.weight"):
                value = value * 8.0  # routers (GPT-OSS's mlp.router)
            if name.endswith("feed_forward.router.weight"):  # Llama 4's router
                value = value * 4.0
            p.copy_(value)
        if "score_bias" in spec:  # e_score_correction_bias: a buffer, ± score_bias
            for name, b in model.named_buffers():
                if name.endswith("e_score_correction_bias"):
                    b.copy_((torch.rand(b.shape, generator=gen) * 2 - 1) * spec["score_bias"])
    return model


def has_router_loss(model):
    return hasattr(model, "router_aux_loss_coef")


def is_packed_step(x):
    """A packed step of llama4_packed_batches (model inputs as tensors), not an example or a list of them."""
    return isinstance(x, dict) and isinstance(x.get("input_ids"), torch.Tensor)


def forward(model, examples):
    if is_packed_step(examples):  # a packed step (llama4_packed_batches): position ids, no attention mask
        return model(**examples)
    input_ids, attention_mask, labels = mf.collate(examples)
    extra = {"output_router_logits": True} if has_router_loss(model) else {}
    return model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, **extra)


def train(model, examples, t, aux_on):
    """mf.train's loop (AdamW, decay on matrices, clipping, schedule), recording the aux loss per step. Biases never
    decay, GPT-OSS's stacked expert biases [E, out] included (HF Trainer's rule: no "bias" in the name)."""
    bs, num_steps = t["batch_size"], t["num_steps"]
    decays = lambda name, p: p.ndim >= 2 and not name.endswith("bias")  # noqa: E731
    decay = [p for n, p in model.named_parameters() if decays(n, p)]
    no_decay = [p for n, p in model.named_parameters() if not decays(n, p)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": t["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=t["learning_rate"], betas=(t["beta1"], t["beta2"]), eps=t["eps"], foreach=False, fused=False)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: mf.lr_factor(s, t["lr_scheduler"], t["warmup_steps"], num_steps, t["min_lr_ratio"]))
    losses, aux_losses, grad_norms, lrs = [], [], [], []
    model.train()
    for step in range(num_steps):
        out = forward(model, examples[step] if is_packed_step(examples[0]) else examples[step * bs:(step + 1) * bs])
        loss = out.loss
        if not aux_on and has_router_loss(model):  # output_router_logits above only records it: LM loss alone
            loss = loss - model.router_aux_loss_coef * out.aux_loss
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), t["max_grad_norm"])
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        aux_losses.append(out.aux_loss.item() if has_router_loss(model) else 0.0)
        grad_norms.append(grad_norm.item())
    return losses, aux_losses, grad_norms, lrs


def routing_notes(model, examples, t):
    """Per layer, per step, per sequence: how many of its tokens each expert receives (first forward of each step
    on a copy: routing facts, not the recorded run)."""
    import copy
    probe = copy.deepcopy(model)
    counts = {}
    hooks = []
    for name, module in probe.named_modules():
        if name.endswith(("mlp.gate", "block_sparse_moe.gate", "mlp.router")):
            def hook(mod, inp, out, name=name):
                counts.setdefault(name, []).append(out[2].detach())
            hooks.append(module.register_forward_hook(hook))
    bs = t["batch_size"]
    empty = 0
    sparse_layers = set()
    with torch.no_grad():
        for step in range(t["num_steps"]):
            batch = examples[step * bs:(step + 1) * bs]
            counts.clear()
            forward(probe, batch)
            longest = max(len(ex["input_ids"]) for ex in batch)
            for name, (idx,) in counts.items():
                sparse_layers.add(name)
                E = probe.config.num_local_experts if hasattr(probe.config, "num_local_experts") else probe.config.num_experts
                idx = idx.reshape(len(batch), longest, -1)
                for b, ex in enumerate(batch):
                    hit = torch.bincount(idx[b, : len(ex["input_ids"])].reshape(-1), minlength=E)
                    empty += int((hit == 0).sum())
    for h in hooks:
        h.remove()
    if empty == 0:
        raise RuntimeError("no expert goes without tokens in any sequence: routing is not uneven enough")
    return {"sparse_layers": sorted(sparse_layers),
            "experts_without_tokens_in_a_sequence": empty}


def llama4_routing_notes(model, steps):
    """Llama 4: how many (MoE layer, step, sequence, expert) receive no real token, over the first forward of each
    step on a copy, and the longest sequence (it must run past a chunk boundary)."""
    import copy
    probe = copy.deepcopy(model)
    picked = []
    hooks = [m.register_forward_hook(lambda mod, inp, out: picked.append(out[1].detach()))
             for name, m in probe.named_modules() if name.endswith("feed_forward.router")]
    E, k = probe.config.num_local_experts, probe.config.num_experts_per_tok
    empty, longest = 0, 0
    with torch.no_grad():
        for batch in steps:
            picked.clear()
            forward(probe, batch)
            if is_packed_step(batch):  # packed rows: real tokens are those before the right padding
                lengths = [int((row != mf.IGNORE).nonzero().max()) + 1 for row in batch["labels"]]
                shape = batch["input_ids"].shape
                valid = torch.arange(shape[1])[None, :] < torch.tensor(lengths)[:, None]
            else:
                valid = mf.collate(batch)[1].bool()
                shape = valid.shape
            longest = max(longest, int(valid.sum(1).max()))
            for logits in picked:
                idx = torch.topk(logits, k, dim=1).indices.reshape(shape[0], shape[1], k)
                for b in range(shape[0]):
                    hit = torch.bincount(idx[b][valid[b]].reshape(-1), minlength=E)
                    empty += int((hit == 0).sum())
    for h in hooks:
        h.remove()
    if empty == 0:
        raise RuntimeError("no expert goes without tokens in any sequence: routing is not uneven enough")
    if longest <= probe.config.attention_chunk_size:
        raise RuntimeError("no sequence is longer than a chunk")
    return {"moe_layers": probe.config.moe_layers, "experts_without_tokens_in_a_sequence": empty,
            "longest_sequence": longest, "attention_chunk_size": probe.config.attention_chunk_size}


MXFP4_TENSORS = ("gate_up_proj", "down_proj")


def mxfp4_quantize(w):
    """A stacked-experts tensor [E, in, out] as MXFP4 (GPT-OSS's published form): blocks U8 [E, out, in/32, 16] (the
    low nibble first), scales U8 [E, out, in/32] (e8m0, bias 127), each group of 32 inputs scaled so that its
    largest magnitude fits 6 (FP4 e2m1's largest), codes the nearest FP4 value."""
    from transformers.integrations.mxfp4 import FP4_VALUES
    lut = torch.tensor(FP4_VALUES[:8])
    E, n_in, n_out = w.shape
    g = w.transpose(1, 2).reshape(E, n_out, n_in // 32, 32)
    amax = g.abs().amax(dim=-1).clamp(min=2.0 ** -100)
    exponent = torch.floor(torch.log2(amax)) - 2  # 6 = 1.5·2²: amax / 2^exponent < 8
    scaled = g / torch.pow(2.0, exponent)[..., None]
    magnitude = (scaled.abs()[..., None] - lut).abs().argmin(dim=-1)
    code = (magnitude | ((scaled < 0).to(torch.int64) << 3)).to(torch.uint8)
    blocks = (code[..., 0::2] | (code[..., 1::2] << 4)).to(torch.uint8)
    scales = (exponent + 127).to(torch.uint8)
    return blocks, scales


def mxfp4_experts(model):
    """Quantises every layer's stacked experts in place to what their MXFP4 form holds (dequantised by transformers'
    own convert_moe_packed_tensors, which must give back exactly those values); returns the blocks and scales."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    packed = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.rsplit(".", 1)[-1] in MXFP4_TENSORS:
                blocks, scales = mxfp4_quantize(p.detach())
                p.copy_(convert_moe_packed_tensors(blocks, scales, dtype=torch.float32))
                if not torch.equal(convert_moe_packed_tensors(*mxfp4_quantize(p.detach()), dtype=torch.float32), p):
                    raise RuntimeError(f"{name}: MXFP4 round trip is not exact")
                packed[name + "_blocks"], packed[name + "_scales"] = blocks, scales
    return packed


def write_mxfp4_checkpoint(model_dir, packed):
    """model.safetensors with the stacked experts replaced by their _blocks / _scales, and config.json's
    quantization_config as the published GPT-OSS checkpoints have it."""
    path = model_dir / "model.safetensors"
    tensors = {k: v for k, v in load_file(path).items() if k.rsplit(".", 1)[-1] not in MXFP4_TENSORS}
    tensors.update({k: v.contiguous() for k, v in packed.items()})
    save_file(tensors, str(path), metadata={"format": "pt"})
    cfg_path = model_dir / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["quantization_config"] = {"quant_method": "mxfp4",
                                  "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                             "model.embed_tokens", "lm_head"]}
    mf.write_json(cfg_path, cfg)


def make_case(spec):
    case = spec["case"]
    out = mf.FIXTURES / case
    if out.exists():
        import shutil
        shutil.rmtree(out)
    for d in ("model", "data", "reference"):
        (out / d).mkdir(parents=True)
    t = dict(mf.COMMON_TRAINING, **spec["training"])
    llama4 = spec["model_cls"] is Llama4ForCausalLM
    examples = llama4_examples(spec, t) if llama4 else mf.make_examples(spec["seed"], t["batch_size"] * t["num_steps"])
    model = build_model(spec)
    packed = mxfp4_experts(model) if spec.get("mxfp4") else None
    initial_state = {k: v.clone() for k, v in model.state_dict().items()}  # for the float64 run
    model.save_pretrained(out / "model", safe_serialization=True)
    (out / "model" / "generation_config.json").unlink(missing_ok=True)
    saved_keys = set(load_file(out / "model" / "model.safetensors").keys())
    cfg_path = out / "model" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.update(spec.get("config_json_overrides", {}))
    mf.write_json(cfg_path, cfg)
    if packed is not None:
        write_mxfp4_checkpoint(out / "model", packed)
    mf.write_json(out / "data" / "dataset_info.json", {"fixture": {"file_name": "train.jsonl", "formatting": "tokenized"}})
    with open(out / "data" / "train.jsonl", "w") as f:
        for ex in examples:
            f.write(json.dumps(ex, separators=(",", ":")) + "\n")
    steps = examples
    if llama4:
        steps = (llama4_packed_batches(spec, examples, t) if spec.get("packing") else
                 [examples[k * t["batch_size"]:(k + 1) * t["batch_size"]] for k in range(t["num_steps"])])
        notes = llama4_routing_notes(model, steps)
        if not spec.get("packing"):
            steps = examples
    else:
        notes = routing_notes(model, examples, t)
    aux_on = bool(getattr(spec["config"], "output_router_logits", False)) and has_router_loss(model)
    losses, aux_losses, grad_norms, lrs = train(model, steps, t, aux_on)
    # save_pretrained writes the checkpoint format (one tensor per expert); take the final state the same way.
    model.save_pretrained(out / "reference" / "final", safe_serialization=True)
    final = load_file(out / "reference" / "final" / "model.safetensors")
    import shutil
    shutil.rmtree(out / "reference" / "final")
    if set(final) != saved_keys:
        raise RuntimeError(f"{case}: final tensors differ from the initial ones' names")
    save_file(final, str(out / "reference" / "final.safetensors"), metadata={"format": "pt"})
    model64 = build_model(spec)
    model64.load_state_dict(initial_state)
    losses64 = mf.fp64_run(model64, lambda m: train(m, steps, t, aux_on)[0])
    model64.save_pretrained(out / "reference" / "final64", safe_serialization=True)
    final64 = load_file(out / "reference" / "final64" / "model.safetensors")
    shutil.rmtree(out / "reference" / "final64")
    reference = {
        "case": case,
        "architecture": spec["model_cls"].__name__,
        "training": {k: t[k] for k in ("batch_size", "num_steps", "learning_rate", "lr_scheduler", "warmup_steps",
                                       "min_lr_ratio", "weight_decay", "max_grad_norm", "beta1", "beta2", "eps")},
        "losses": losses,
        "aux_losses": aux_losses if aux_on else [],
        "aux_coef": model.router_aux_loss_coef if aux_on else 0.0,
        "grad_norms": grad_norms,
        "lrs": lrs,
        "notes": notes,
        "fp64": mf.write_fp64_reference(out, final64, losses64),
    }
    mf.write_json(out / "reference.json", reference)
    mf.write_train_yaml(out / "train.yaml", spec, t)
    if spec.get("packing"):
        text = (out / "train.yaml").read_text()
        text = text.replace(f"max_seq_len: {mf.MAX_SEQ_LEN}\n", f"max_seq_len: {PACKED_MAX_SEQ_LEN}\n")
        (out / "train.yaml").write_text(text.replace("packing: false\n", "packing: true\n"))
    extra = spec.get("train_yaml_training", {})
    if extra:
        text = (out / "train.yaml").read_text()
        lines = "".join(f"  {k}: {mf.yaml_scalar(v)}\n" for k, v in extra.items())
        text = text.replace("optimizer:\n", lines + "optimizer:\n")
        (out / "train.yaml").write_text(text.replace("tools/make_fixtures.py", "tools/make_moe_fixtures.py"))
    else:
        (out / "train.yaml").write_text((out / "train.yaml").read_text().replace(
            "tools/make_fixtures.py", "tools/make_moe_fixtures.py"))
    size = max(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"  {case}: losses {losses}, aux {aux_losses if aux_on else 'off'}, notes {notes}, largest file {size} B")
    return reference


def write_readme():
    rows = "\n".join(f"| `{s['case']}` | {s['model_cls'].__name__} | {s['what']} |" for s in CASES)
    (mf.FIXTURES / "README_moe.md").write_text(f"""# Mixture-of-experts golden fixtures

Written by `tools/make_moe_fixtures.py` (run by hand; the data, the training loop's semantics and the train.yaml
writer are those of `tools/make_fixtures.py`, see README.md), with torch {torch.__version__}, transformers
{mf.transformers.__version__}, fp32, one thread. Vocab 128, hidden 32, 3 layers, 4 heads / 2 kv heads, 4 experts
of width 24, top 2, router weights ×8 at init (uneven routing: `notes` in reference.json counts the experts that
receive no token of some sequence, which a `micro_batch_size: 1` run meets as experts without rows). 4 AdamW
steps of batch 4. reference.json adds `aux_losses` (transformers' outputs.aux_loss per step where the router loss
is on) and `aux_coef`; `losses` are outputs.loss (LM loss + coef × aux loss). reference/final_fp64.safetensors is
the same run in float64 end to end with transformers' eager experts (README.md, Tolerances).

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
