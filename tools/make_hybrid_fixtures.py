#!/usr/bin/env python3
"""Write the golden training fixtures of the hybrid linear-attention families under tests/fixtures/ (run by hand,
never by CI), in the format tools/make_fixtures.py documents (model/, data/, reference.json,
reference/final.safetensors, train.yaml).

Usage, from the repository root (torch 2.x, transformers 5.x with Qwen3.5; CPU only):

    python3 tools/make_hybrid_fixtures.py            # every case
    python3 tools/make_hybrid_fixtures.py qwen3_5    # only the named cases

Cases:
  qwen3_5         Qwen3_5ForCausalLM, 4 layers (linear, linear, full, linear attention), padded batches of sequences
                  3..200 tokens long (longer than two of transformers' 64-token chunks, lengths not chunk multiples).
  qwen3_5_packed  the same model with dataset.packing: true (max_seq_len 256): several examples per sequence.
  qwen3_next      Qwen3NextForCausalLM with num_experts 0 (dense): the fused in_proj_qkvz / in_proj_ba grouped by k head.
  qwen3_5_chunk   Qwen3_5ForCausalLM, 2 layers (linear, full attention), sequences shorter than, equal to and longer
                  than one 64-token chunk; also the DeltaNet gate tensors of a run whose gate gradient is perturbed by
                  1 % (reference/final_gate_perturbed.safetensors: what the parity rule must reject).
  qwen3_5_moe     Qwen3_5MoeForCausalLM: the qwen3_5 stack with every feed-forward 4 experts (top 2, renormalised) plus
                  the sigmoid-gated shared expert; the router loss on from config.json (coefficient 0.05).
  qwen3_next_moe  Qwen3NextForCausalLM with 4 experts (top 2, norm_topk_prob false) on layers 0, 2, 3 and a dense MLP
                  on layer 1 (mlp_only_layers [1]); the router loss off.
  minimax         MiniMaxForCausalLM, 4 layers (linear, full, linear, linear attention: lightning attention between
                  softmax layers), residuals from the norms with alpha/beta factors other than 1, 4 experts (top 2)
                  on every layer, the router loss on; block_size 16, so sequences of 3..200 tokens span many of
                  transformers' lightning blocks; padded batches.
  minimax_packed  the same model with dataset.packing: true (max_seq_len 256): the state restarts per example.

The MoE cases add per step the router load-balancing loss to reference.json ("aux_losses", transformers'
outputs.aux_loss, empty where it is off; "losses" are LM loss + router_aux_loss_coef × aux loss where it is on, as
tools/make_moe_fixtures.py records them), with router weights × 8 at init so that routing is uneven.

It also writes tests/fixtures/HYBRID.md (the cases and what each reference recorded; `--readme` writes only that).

Every case is also trained in float64 end to end from the same initial weights (make_fixtures.fp64_run: transformers'
explicit float32 casts in the gates, norms and the delta-rule fallback made float64) into
reference/final_fp64.safetensors, and reference.json's "fp64" says whether that run is finite.

The reference is transformers' own model with its PyTorch fallback of the chunked gated delta rule (no
flash-linear-attention installed), fp32, eager attention, 3 AdamW steps of 4 sequences. transformers' fallback does
not cut the recurrent state at packed-example boundaries, so the packed case's reference runs each step's examples
as one padded batch: what a packed step must compute when packing leaks nothing (mean cross-entropy over the same
targets). The packing itself is MegaTrain's (src/data/packing.h: LLaMA-Factory's greedy knapsack, deterministic),
replayed here to know which examples each step holds.
"""

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402  (its seeds, threads, determinism, writers and the AdamW loop semantics)
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import (  # noqa: E402
    MiniMaxConfig,
    MiniMaxForCausalLM,
    Qwen3_5ForCausalLM,
    Qwen3_5MoeForCausalLM,
    Qwen3_5MoeTextConfig,
    Qwen3_5TextConfig,
    Qwen3NextConfig,
    Qwen3NextForCausalLM,
)

FIXTURES = mf.FIXTURES
MAX_SEQ_LEN = 256
TRAINING = dict(mf.COMMON_TRAINING, num_steps=3, lr_scheduler="cosine", warmup_steps=1, min_lr_ratio=0.1,
                max_grad_norm=1.0)

HYBRID_MODEL = dict(
    vocab_size=mf.VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=4, max_position_embeddings=MAX_SEQ_LEN,
    hidden_act="silu", initializer_range=0.02, use_cache=False, pad_token_id=None, bos_token_id=None,
    eos_token_id=None, num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
    tie_word_embeddings=False, attention_bias=False,
    layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"],
    linear_conv_kernel_dim=4, linear_key_head_dim=8, linear_value_head_dim=8, linear_num_key_heads=2,
    linear_num_value_heads=4,
    rope_parameters={"rope_type": "default", "rope_theta": 1000.0, "partial_rotary_factor": 0.25},
)

EXPERTS = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24, shared_expert_intermediate_size=40)
HYBRID_MOE_MODEL = {k: v for k, v in HYBRID_MODEL.items() if k != "intermediate_size"}  # Qwen3_5MoeTextConfig: none

# MiniMax: head_dim 8 × 4 heads (the lightning width 32), GQA 4/2 on the full layers, residual factors apart from 1
# and from each other (the released model's are 3.5566 and 1).
MINIMAX_MODEL = dict(
    vocab_size=mf.VOCAB, hidden_size=32, intermediate_size=24, num_hidden_layers=4, max_position_embeddings=MAX_SEQ_LEN,
    hidden_act="silu", initializer_range=0.02, use_cache=False, pad_token_id=None, bos_token_id=None,
    eos_token_id=None, num_attention_heads=4, num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
    tie_word_embeddings=False, num_local_experts=4, num_experts_per_tok=2, block_size=16,
    layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention"],
    full_attn_alpha_factor=1.6, full_attn_beta_factor=0.8, linear_attn_alpha_factor=1.3,
    linear_attn_beta_factor=1.2, mlp_alpha_factor=1.5, mlp_beta_factor=0.7,
    output_router_logits=True, router_aux_loss_coef=0.05,
    rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
)

CASES = [
    dict(case="qwen3_5", seed=31, model_cls=Qwen3_5ForCausalLM, config=lambda: Qwen3_5TextConfig(**HYBRID_MODEL),
         lengths=(3, 200), packing=False),
    dict(case="qwen3_5_packed", seed=32, model_cls=Qwen3_5ForCausalLM,
         config=lambda: Qwen3_5TextConfig(**HYBRID_MODEL), lengths=(20, 150), packing=True),
    dict(case="qwen3_next", seed=33, model_cls=Qwen3NextForCausalLM,
         config=lambda: Qwen3NextConfig(**HYBRID_MODEL, num_experts=0), lengths=(3, 140), packing=False),
    dict(case="qwen3_5_chunk", seed=36, model_cls=Qwen3_5ForCausalLM,
         config=lambda: Qwen3_5TextConfig(**dict(HYBRID_MODEL, num_hidden_layers=2,
                                                 layer_types=["linear_attention", "full_attention"])),
         lengths=[12, 25, 17, 21, 64, 63, 65, 64, 128, 20, 100, 64], packing=False, gate_perturbed=True,
         a_range=(0.01, 16.0)),
    dict(case="qwen3_5_moe", seed=34, model_cls=Qwen3_5MoeForCausalLM,
         config=lambda: Qwen3_5MoeTextConfig(**HYBRID_MOE_MODEL, **EXPERTS, output_router_logits=True,
                                             router_aux_loss_coef=0.05),
         lengths=(3, 160), packing=False),
    dict(case="qwen3_next_moe", seed=35, model_cls=Qwen3NextForCausalLM,
         config=lambda: Qwen3NextConfig(**HYBRID_MODEL, **EXPERTS, decoder_sparse_step=1, mlp_only_layers=[1],
                                        norm_topk_prob=False, output_router_logits=False),
         lengths=(3, 140), packing=False),
    dict(case="minimax", seed=37, model_cls=MiniMaxForCausalLM, config=lambda: MiniMaxConfig(**MINIMAX_MODEL),
         lengths=(3, 200), packing=False, norms_around_one=True),
    dict(case="minimax_packed", seed=38, model_cls=MiniMaxForCausalLM, config=lambda: MiniMaxConfig(**MINIMAX_MODEL),
         lengths=(20, 150), packing=True, norms_around_one=True),
]


def is_moe(model):
    return hasattr(model, "router_aux_loss_coef") and model.config.num_experts > 0


def build_model(spec):
    """The model under torch.manual_seed(seed), every parameter then redrawn: matrices and the conv N(0, 0.05²) and
    N(0, 0.3²), (1 + w) norms around 0 and the gated norm around 1 (± 0.1; with the spec's norms_around_one, MiniMax's
    w·x̂ norms, every norm around 1), A_log = log U(1, 4) (log U(spec's a_range)), dt_bias N(0, 0.5²)."""
    torch.manual_seed(spec["seed"])
    config = spec["config"]()
    config._attn_implementation = "eager"
    model = spec["model_cls"](config).to(torch.float32)
    gen = torch.Generator().manual_seed(1000 + spec["seed"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("conv1d.weight"):
                value = torch.randn(p.shape, generator=gen) * 0.3
            elif p.ndim in (2, 3):  # matrices and the 3-D expert tensors
                value = torch.randn(p.shape, generator=gen) * 0.05
                if name.endswith("mlp.gate.weight"):  # routers: uneven routing
                    value = value * 8.0
            elif name.endswith("A_log"):
                lo, hi = spec.get("a_range", (1.0, 4.0))
                value = torch.log(lo + (hi - lo) * torch.rand(p.shape, generator=gen))
            elif name.endswith("dt_bias"):
                value = torch.randn(p.shape, generator=gen) * 0.5
            elif name.endswith("linear_attn.norm.weight") or ("norm" in name and spec.get("norms_around_one")):
                value = 1.0 + torch.randn(p.shape, generator=gen) * 0.1
            elif "norm" in name:
                value = torch.randn(p.shape, generator=gen) * 0.1
            else:
                raise RuntimeError(f"unexpected parameter {name} {tuple(p.shape)}")
            p.copy_(value)
    return model


def make_examples(seed, n, lengths):
    """n examples of lengths uniform in `lengths` (lo, hi), or of the n lengths listed; every other one carries labels
    with a masked prompt prefix."""
    rng = random.Random(seed)
    examples = []
    for i in range(n):
        length = lengths[i] if isinstance(lengths, list) else rng.randint(*lengths)
        ids = [rng.randrange(mf.VOCAB) for _ in range(length)]
        ex = {"input_ids": ids}
        if i % 2 == 1:
            k = rng.randint(1, length - 2)
            ex["labels"] = [mf.IGNORE] * k + ids[k:]
        examples.append(ex)
    return examples


def pack(examples, max_len):
    """src/data/packing.cpp's greedy knapsack: open a sequence, add the longest remaining example that fits (the
    earliest among equal lengths) until none fits; sequences in opening order, each a list of example indices."""
    remaining = list(range(len(examples)))
    sequences = []
    while remaining:
        used, seq = 0, []
        while True:
            fits = [i for i in remaining if used + len(examples[i]["input_ids"]) <= max_len]
            if not fits:
                break
            best = max(fits, key=lambda i: (len(examples[i]["input_ids"]), -i))
            seq.append(best)
            used += len(examples[best]["input_ids"])
            remaining.remove(best)
        sequences.append(seq)
    return sequences


def step_batches(spec, examples, t):
    """Each step's examples: 4 lines per step, or (packed) the examples of 4 packed sequences."""
    bs = t["batch_size"]
    if not spec["packing"]:
        return [examples[k * bs:(k + 1) * bs] for k in range(t["num_steps"])]
    sequences = pack(examples, MAX_SEQ_LEN)
    if len(sequences) != bs * t["num_steps"]:
        raise RuntimeError(f"{spec['case']}: {len(examples)} examples packed into {len(sequences)} sequences, "
                           f"need {bs * t['num_steps']}")
    return [[examples[i] for seq in sequences[k * bs:(k + 1) * bs] for i in seq] for k in range(t["num_steps"])]


def train(model, batches, t):
    """make_fixtures.train's loop (AdamW, decay on ndim >= 2, LambdaLR, clipping) over explicit per-step batches."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": t["weight_decay"]},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=t["learning_rate"], betas=(t["beta1"], t["beta2"]), eps=t["eps"], foreach=False,
                                  fused=False)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: mf.lr_factor(
        s, t["lr_scheduler"], t["warmup_steps"], t["num_steps"], t["min_lr_ratio"]))
    losses, aux_losses, grad_norms, lrs = [], [], [], []
    model.train()
    for batch in batches:
        if is_moe(model):
            input_ids, attention_mask, labels = mf.collate(batch)
            out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, output_router_logits=True)
            loss = out.loss
            if model.config.output_router_logits:
                aux_losses.append(out.aux_loss.item())
            else:  # output_router_logits above only records it: the LM loss alone
                loss = loss - model.router_aux_loss_coef * out.aux_loss
        else:
            loss = mf.batch_loss(model, batch)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), t["max_grad_norm"])
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        grad_norms.append(grad_norm.item())
    return losses, aux_losses, grad_norms, lrs


def routing_notes(model, batches):
    """The MoE layers, and over layers, steps and sequences the experts that receive no token of the sequence (a
    micro-batch of one sequence then has experts without rows), counted on a copy's first forward of each step."""
    import copy
    probe = copy.deepcopy(model)
    picked = []
    hooks = [m.register_forward_hook(lambda mod, inp, out: picked.append(out[2].detach()))
             for name, m in probe.named_modules() if name.endswith("mlp.gate")]
    empty = 0
    with torch.no_grad():
        for batch in batches:
            picked.clear()
            mf.batch_loss(probe, batch)
            longest = max(len(ex["input_ids"]) for ex in batch)
            for idx in picked:
                idx = idx.reshape(len(batch), longest, -1)
                for b, ex in enumerate(batch):
                    hit = torch.bincount(idx[b, :len(ex["input_ids"])].reshape(-1), minlength=probe.config.num_experts)
                    empty += int((hit == 0).sum())
    for h in hooks:
        h.remove()
    return {"moe_layers": len(hooks), "experts_without_tokens_in_a_sequence": empty}


def gate_perturbed_final(spec, batches, t):
    """The fp32 run again with the gradient of every Gated DeltaNet's gate g (the per-token log decay) perturbed by 1 %
    (relative L2: a fresh random direction of 1 % of its norm at every layer and step); the final A_log, dt_bias and
    in_proj_a of each DeltaNet layer. The parity test checks that the update rule rejects them."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m
    gen = torch.Generator().manual_seed(4300 + spec["seed"])

    def perturb(grad):
        noise = torch.randn(grad.shape, generator=gen, dtype=grad.dtype)
        return grad + 0.01 * grad.norm() * noise / noise.norm()

    original = m.torch_chunk_gated_delta_rule

    def hooked(query, key, value, g, beta, **kwargs):
        g.register_hook(perturb)
        return original(query, key, value, g, beta, **kwargs)

    model = build_model(spec)
    m.torch_chunk_gated_delta_rule = hooked
    try:
        train(model, batches, t)
    finally:
        m.torch_chunk_gated_delta_rule = original
    gates = ("linear_attn.A_log", "linear_attn.dt_bias", "linear_attn.in_proj_a.weight")
    return {k: v.detach().clone() for k, v in model.state_dict().items() if k.endswith(gates)}


def chunked_vs_recurrent(model, batch):
    """The largest relative difference between transformers' chunked and recurrent delta-rule fallbacks on the
    first DeltaNet layer's inputs of `batch` (a check that the chunked reference computes the recurrence)."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m
    captured = {}

    original = m.torch_chunk_gated_delta_rule

    def capture(query, key, value, g, beta, **kwargs):
        captured.setdefault("args", (query, key, value, g, beta))
        return original(query, key, value, g, beta, **kwargs)

    with torch.no_grad():
        m.torch_chunk_gated_delta_rule = capture
        try:
            mf.batch_loss(model, batch)
        finally:
            m.torch_chunk_gated_delta_rule = original
        q, k, v, g, beta = captured["args"]
        a, _ = original(q, k, v, g=g, beta=beta, use_qk_l2norm_in_kernel=True)
        b, _ = m.torch_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, use_qk_l2norm_in_kernel=True)
    return ((a - b).norm() / b.norm()).item()


def without_buffers(model, tensors):
    """The checkpoint tensors less the model's persistent buffers: MiniMaxLightningAttention's slope_rate and
    query/key/diagonal decays are functions of the config that transformers recomputes at load (_init_weights), not
    weights; MegaTrain neither reads nor exports them."""
    buffers = {name for name, _ in model.named_buffers()}
    return {k: v for k, v in tensors.items() if k not in buffers}


def save_weights(model, directory):
    """save_pretrained into directory, its model.safetensors without the persistent buffers."""
    model.save_pretrained(directory, safe_serialization=True)
    path = directory / "model.safetensors"
    save_file(without_buffers(model, load_file(path)), str(path), metadata={"format": "pt"})


def write_train_yaml(path, spec, t):
    mf.write_train_yaml(path, spec, t)
    text = path.read_text()
    text = text.replace(f"max_seq_len: {mf.MAX_SEQ_LEN}\n", f"max_seq_len: {MAX_SEQ_LEN}\n")
    text = text.replace("packing: false\n", f"packing: {'true' if spec['packing'] else 'false'}\n")
    text = text.replace("tools/make_fixtures.py", "tools/make_hybrid_fixtures.py")
    path.write_text(text)


def make_case(spec):
    case = spec["case"]
    out = FIXTURES / case
    if out.exists():
        shutil.rmtree(out)
    for sub in ("model", "data", "reference"):
        (out / sub).mkdir(parents=True)
    t = dict(TRAINING)
    n_examples = t["batch_size"] * t["num_steps"]
    if spec["packing"]:  # enough examples for 4 sequences per step
        rng_len = spec["lengths"]
        n_examples = 1
        while True:
            examples = make_examples(spec["seed"], n_examples, rng_len)
            if len(pack(examples, MAX_SEQ_LEN)) >= t["batch_size"] * t["num_steps"]:
                break
            n_examples += 1
        if len(pack(examples, MAX_SEQ_LEN)) != t["batch_size"] * t["num_steps"]:
            raise RuntimeError(f"{case}: no example count packs into exactly {t['batch_size'] * t['num_steps']}")
    else:
        examples = make_examples(spec["seed"], n_examples, spec["lengths"])
    batches = step_batches(spec, examples, t)

    model = build_model(spec)
    save_weights(model, out / "model")
    (out / "model" / "generation_config.json").unlink(missing_ok=True)
    mf.write_json(out / "data" / "dataset_info.json", {"fixture": {"file_name": "train.jsonl", "formatting": "tokenized"}})
    with open(out / "data" / "train.jsonl", "w") as f:
        for ex in examples:
            f.write(json.dumps(ex, separators=(",", ":")) + "\n")

    notes = {"max_example_length": max(len(ex["input_ids"]) for ex in examples),
             "examples_per_step": [len(b) for b in batches]}
    if spec["model_cls"] is Qwen3_5ForCausalLM:
        notes["chunked_vs_recurrent_rel_diff"] = chunked_vs_recurrent(build_model(spec), batches[0])
    if is_moe(model):
        notes.update(routing_notes(model, batches))

    losses, aux_losses, grad_norms, lrs = train(model, batches, t)
    saved_keys = set(load_file(out / "model" / "model.safetensors").keys())
    # save_pretrained writes the checkpoint format (MoE: one tensor per expert); take the final state the same way.
    save_weights(model, out / "reference" / "final")
    final = load_file(out / "reference" / "final" / "model.safetensors")
    shutil.rmtree(out / "reference" / "final")
    if set(final) != saved_keys:
        raise RuntimeError(f"{case}: final tensors differ from the initial ones' names")
    save_file(final, str(out / "reference" / "final.safetensors"), metadata={"format": "pt"})
    model64 = build_model(spec)  # the same initial weights
    losses64 = mf.fp64_run(model64, lambda m: train(m, batches, t)[0])
    save_weights(model64, out / "reference" / "final64")
    final64 = load_file(out / "reference" / "final64" / "model.safetensors")
    shutil.rmtree(out / "reference" / "final64")
    reference = {"case": case, "architecture": spec["model_cls"].__name__,
                 "training": {k: t[k] for k in ("batch_size", "num_steps", "learning_rate", "lr_scheduler",
                                                "warmup_steps", "min_lr_ratio", "weight_decay", "max_grad_norm",
                                                "beta1", "beta2", "eps")},
                 "losses": losses, "grad_norms": grad_norms, "lrs": lrs, "notes": notes}
    if is_moe(model):
        reference["aux_losses"] = aux_losses
        reference["aux_coef"] = model.router_aux_loss_coef if aux_losses else 0.0
    reference["fp64"] = mf.write_fp64_reference(out, final64, losses64)
    if spec.get("gate_perturbed"):
        save_file(gate_perturbed_final(spec, batches, t), str(out / "reference" / "final_gate_perturbed.safetensors"),
                  metadata={"format": "pt"})
    mf.write_json(out / "reference.json", reference)
    write_train_yaml(out / "train.yaml", spec, t)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{case}: losses {losses}, aux {aux_losses or 'off'}, notes {notes}, {size} bytes")


CASE_TEXT = {
    "qwen3_5": "Qwen3_5ForCausalLM: 4 layers (layer_types linear, linear, full, linear), hidden 32, 4 heads / 2 kv "
               "heads × 16 with the sigmoid output gate, q/k norm and partial rotary 0.25 (rotary dim 4, theta 1000); "
               "Gated DeltaNet 2 k heads / 4 v heads × 8, conv kernel 4; (1 + w) norms; padded batches of sequences "
               "3..200 tokens (past two 64-token chunks, not chunk multiples).",
    "qwen3_5_packed": "The same model with dataset.packing: true (max_seq_len 256): every step packs several examples "
                      "per sequence; the reference runs them unpacked (the state must restart per example).",
    "qwen3_next": "Qwen3NextForCausalLM with num_experts 0 (dense feed-forward): in_proj_qkvz and in_proj_ba grouped "
                  "by k head; otherwise the qwen3_5 shape.",
    "qwen3_5_chunk": "The qwen3_5 shape with 2 layers (linear, full attention): padded batches of sequences shorter "
                     "than, equal to and longer than one 64-token chunk (12-25; 63, 64, 65; 20-128); A_log = log U(0.01, 16) "
                     "as transformers initialises it: decays down to exp(−20) per token, where the gate gradients are "
                     "tiny and PyTorch fp32 is far from float64 (the regime of issue #43). "
                     "reference/final_gate_perturbed.safetensors: the DeltaNet gate tensors after the same fp32 run with "
                     "the gradient of the gate g perturbed by 1 % (relative L2, fresh per layer and step).",
    "qwen3_5_moe": "Qwen3_5MoeForCausalLM: the qwen3_5 shape with every feed-forward 4 experts of 24 (softmax top 2, "
                   "renormalised) plus a shared expert of 40 scaled by sigmoid(shared_expert_gate); router weights × 8; "
                   "**router loss on** (output_router_logits, coefficient 0.05); sequences 3..160 tokens.",
    "qwen3_next_moe": "Qwen3NextForCausalLM with 4 experts of 24 (top 2, **norm_topk_prob false**) and the gated "
                      "shared expert of 40 on layers 0, 2, 3, a **dense MLP on layer 1** (mlp_only_layers [1]); "
                      "**router loss off**; sequences 3..140 tokens.",
    "minimax": "MiniMaxForCausalLM: 4 layers (layer_types linear, full, linear, linear), hidden 32, lightning attention "
               "4 heads × 8 (per-layer decay factors, the SiLU'd qkv, the norm over the heads' width, the sigmoid "
               "output gate), full attention 4 / 2 kv heads × 8 (theta 1000); residuals from the norms with factors "
               "full 1.6 / 0.8, linear 1.3 / 1.2, mlp 1.5 / 0.7; every feed-forward 4 experts of 24 (softmax top 2, "
               "renormalised), router weights × 8, **router loss on** (coefficient 0.05); block_size 16: padded "
               "sequences of 3..200 tokens span up to 13 of transformers' lightning blocks.",
    "minimax_packed": "The minimax model with dataset.packing: true (max_seq_len 256): several examples per sequence; "
                      "the reference runs them unpacked (the lightning state must restart per example).",
}


def write_readme():
    lines = ["# Hybrid linear-attention fixtures", "",
             "Written by `tools/make_hybrid_fixtures.py` (run by hand; same format and training loop as "
             "`tools/make_fixtures.py`, see README.md): transformers' own models with its PyTorch fallbacks of the "
             "chunked gated delta rule and the causal conv1d, fp32, eager attention, 3 AdamW steps (cosine, 1 warmup "
             "step, min_lr_ratio 0.1, clipping at 1.0) of 4 sequences. Each case also holds the same run trained in "
             "float64 end to end (reference/final_fp64.safetensors: the delta-rule fallback, the gates and the norms "
             "in float64 too), which the parity tests' update rule measures from (README.md, Tolerances).", "",
             "| case | what it covers | losses | notes |", "|---|---|---|---|"]
    for spec in CASES:
        ref = json.loads((FIXTURES / spec["case"] / "reference.json").read_text())
        losses = ", ".join(f"{x:.6f}" for x in ref["losses"])
        notes = "; ".join(f"{k} {v}" for k, v in ref["notes"].items())
        lines.append(f"| `{spec['case']}` | {CASE_TEXT[spec['case']]} | {losses} | {notes} |")
    (FIXTURES / "HYBRID.md").write_text("\n".join(lines) + "\n")


def main():
    names = [c["case"] for c in CASES]
    parser = argparse.ArgumentParser(description="Write the hybrid linear-attention fixtures under tests/fixtures/.")
    parser.add_argument("cases", nargs="*", metavar="CASE", help=f"default all: {', '.join(names)}")
    parser.add_argument("--readme", action="store_true", help="only write tests/fixtures/HYBRID.md")
    args = parser.parse_args()
    if args.readme:
        write_readme()
        return 0
    unknown = sorted(set(args.cases) - set(names))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}")
    for spec in CASES:
        if not args.cases or spec["case"] in args.cases:
            make_case(spec)
    write_readme()
    return 0


if __name__ == "__main__":
    sys.exit(main())
