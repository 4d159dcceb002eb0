#!/usr/bin/env python3
"""Write the tiny golden training fixtures under tests/fixtures/ (run by hand, never by CI).

Usage, from the repository root (Python 3 with torch 2.x, transformers 5.x, safetensors; CPU only):

    python3 tools/make_fixtures.py                      # every case
    python3 tools/make_fixtures.py gemma2 phi3          # only the named cases (the others stay as they are)
    python3 tools/make_fixtures.py --list               # the case names

For each case (llama, qwen2, qwen3, mistral, gemma2, gemma3, phi3, glm4, internlm2, baichuan2_7b, baichuan2_13b)
it writes tests/fixtures/<case>/:

  model/config.json, model/model.safetensors
      The INITIAL fp32 weights of a tiny random model (vocab 128, hidden 32, intermediate 64,
      3 layers, max_position_embeddings 64, unless the case says otherwise), via
      save_pretrained(safe_serialization=True). Tied-embedding models have no lm_head.weight tensor in the file.
      The llama case's config.json is rewritten afterwards into the OLD rope format (top-level
      "rope_theta" and "rope_scaling", no "rope_parameters"); the script checks that transformers
      loads it to exactly the same loss.
      The trust_remote_code families (internlm2, baichuan2_*) have no transformers class: the reference is a
      LlamaForCausalLM with identical math (plus Baichuan's NormHead and, for baichuan2_13b, ALiBi instead of
      RoPE), and config.json / model.safetensors are written in the family's own format and names (the script
      checks the conversion round trip and the equivalence to the family's own modeling code).
  data/dataset_info.json, data/train.jsonl
      16 pre-tokenized examples ({"input_ids": [...], "labels": [...]}; labels omitted on some lines,
      meaning labels = input_ids). Step k uses lines 4k..4k+3 in file order.
  reference.json
      The training hyper-parameters and, per step, the loss, the pre-clip total gradient L2 norm and
      the learning rate used, at full float precision (new cases add a "notes" object: what the script
      checked about the case's quirks).
  reference/final.safetensors
      Every parameter after the last step, fp32, HF names (no lm_head.weight when tied).
  reference/final_fp64.safetensors
      The same run trained in float64 end to end from the same initial weights (fp64_run), its final parameters
      as F64 under the same names: what the parity tests measure each update's distance from. reference.json's
      "fp64" holds that run's losses and whether it is finite (a non-finite run writes no file; the tests then keep
      the fp32 rule for the case).
  train.yaml
      A MegaTrain config for the same run (relative paths; the tests override them).

It also writes tests/fixtures/README.md (rows of cases not generated in this run are kept from the files and
the previous README) and prints sanity checks at the end.

Everything is deterministic: fixed seeds, one thread, torch.use_deterministic_algorithms(True),
float32 throughout. The training loop in train() defines the semantics MegaTrain must reproduce.
"""

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

import safetensors  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import (  # noqa: E402
    AttentionInterface,
    AutoModelForCausalLM,
    Gemma2Config,
    Gemma2ForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    Glm4Config,
    Glm4ForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Phi3Config,
    Phi3ForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

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
# The families without a transformers class (trust_remote_code): InternLM2 and Baichuan 2.
# The reference is a LlamaForCausalLM with the same math; these helpers convert its weights to the family's
# names and layout (and back), write the family's config.json, and patch in Baichuan's NormHead and ALiBi.
# ----------------------------------------------------------------------------------------------


def _get_interleave(n):
    """Baichuan 2's ALiBi slopes (modeling_baichuan.py of Baichuan2-13B), verbatim."""
    def _get_interleave_power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return _get_interleave_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (_get_interleave_power_of_2(closest_power_of_2)
            + _get_interleave(2 * closest_power_of_2)[0::2][: n - closest_power_of_2])


def patch_norm_head(model):
    """Baichuan's NormHead in training mode: logits = x · normalize(W_lm)ᵀ (F.normalize over dim 1, eps 1e-12),
    recomputed from the raw weight on every forward, so the gradient flows through the normalisation."""
    head = model.lm_head
    head.forward = lambda hidden_states: F.linear(hidden_states, F.normalize(head.weight))


def patch_alibi(model):
    """Baichuan 2 13B: no rotary embedding (cos = 1, sin = 0, so q and k pass unchanged) and ALiBi biases
    slope_h·(j − i) added to the scaled logits through a 4D float attention mask (−inf above the diagonal and on
    padding keys); eager attention adds it before the softmax. batch_loss() calls model._fixture_attention_mask."""
    cfg = model.config
    heads = cfg.num_attention_heads
    head_dim = cfg.hidden_size // heads

    def no_rope(x, position_ids):
        shape = (*position_ids.shape, head_dim)
        return torch.ones(shape, dtype=x.dtype), torch.zeros(shape, dtype=x.dtype)

    model.model.rotary_emb.forward = no_rope
    slopes = torch.tensor(_get_interleave(heads), dtype=torch.float32)

    def alibi_mask(attention_mask):
        batch, length = attention_mask.shape
        rel = (torch.arange(length)[None, :] - torch.arange(length)[:, None]).to(torch.float32)  # j - i
        bias = slopes[:, None, None] * rel  # [heads, i, j]
        allowed = (rel <= 0)[None, None] & attention_mask.bool()[:, None, None, :]
        return bias[None].expand(batch, heads, length, length).masked_fill(~allowed, float("-inf"))

    model._fixture_attention_mask = alibi_mask


def patch_baichuan2_13b(model):
    patch_norm_head(model)
    patch_alibi(model)


def _layer_map(cfg, names):
    """(llama name, family name) pairs of the tensors that only change name."""
    pairs = [("model.embed_tokens.weight", names["embedding"]), ("model.norm.weight", "model.norm.weight"),
             ("lm_head.weight", names["lm_head"])]
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        for llama, family in names["layer"]:
            pairs.append((p + llama, p + family))
    return pairs


INTERNLM2_NAMES = dict(
    embedding="model.tok_embeddings.weight",
    lm_head="output.weight",
    layer=[("input_layernorm.weight", "attention_norm.weight"), ("self_attn.o_proj.weight", "attention.wo.weight"),
           ("post_attention_layernorm.weight", "ffn_norm.weight"), ("mlp.gate_proj.weight", "feed_forward.w1.weight"),
           ("mlp.up_proj.weight", "feed_forward.w3.weight"), ("mlp.down_proj.weight", "feed_forward.w2.weight")],
)
BAICHUAN_NAMES = dict(
    embedding="model.embed_tokens.weight",
    lm_head="lm_head.weight",
    layer=[(n, n) for n in ("input_layernorm.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                            "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")],
)


def internlm2_to_hf(state, cfg):
    """Llama tensors -> InternLM2's: wqkv rows grouped by kv head (its `group` q heads, then its k head, then its
    v head), as modeling_internlm2.py's rearrange "b q (h gs d) -> b q h gs d" (gs = group + 2) reads them."""
    heads, kv, hidden = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size
    d, group = hidden // heads, heads // kv
    out = {family: state[llama] for llama, family in _layer_map(cfg, INTERNLM2_NAMES)}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        q = state[p + "self_attn.q_proj.weight"].reshape(kv, group, d, hidden)
        k = state[p + "self_attn.k_proj.weight"].reshape(kv, 1, d, hidden)
        v = state[p + "self_attn.v_proj.weight"].reshape(kv, 1, d, hidden)
        out[p + "attention.wqkv.weight"] = torch.cat([q, k, v], dim=1).reshape(kv * (group + 2) * d, hidden)
    return {k: v.detach().to(torch.float32).contiguous().clone() for k, v in out.items()}


def internlm2_from_hf(tensors, cfg):
    heads, kv, hidden = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size
    d, group = hidden // heads, heads // kv
    out = {llama: tensors[family] for llama, family in _layer_map(cfg, INTERNLM2_NAMES)}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        w = tensors[p + "attention.wqkv.weight"].reshape(kv, group + 2, d, hidden)
        out[p + "self_attn.q_proj.weight"] = w[:, :group].reshape(heads * d, hidden)
        out[p + "self_attn.k_proj.weight"] = w[:, group].reshape(kv * d, hidden)
        out[p + "self_attn.v_proj.weight"] = w[:, group + 1].reshape(kv * d, hidden)
    return {k: v.contiguous().clone() for k, v in out.items()}


def baichuan_to_hf(state, cfg):
    """Llama tensors -> Baichuan's: W_pack rows q | k | v (no GQA)."""
    out = {family: state[llama] for llama, family in _layer_map(cfg, BAICHUAN_NAMES)}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}.self_attn."
        out[p + "W_pack.weight"] = torch.cat([state[p + n + ".weight"] for n in ("q_proj", "k_proj", "v_proj")], dim=0)
    return {k: v.detach().to(torch.float32).contiguous().clone() for k, v in out.items()}


def baichuan_from_hf(tensors, cfg):
    out = {llama: tensors[family] for llama, family in _layer_map(cfg, BAICHUAN_NAMES)}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}.self_attn."
        q, k, v = tensors[p + "W_pack.weight"].chunk(3, dim=0)
        out[p + "q_proj.weight"], out[p + "k_proj.weight"], out[p + "v_proj.weight"] = q, k, v
    return {k: v.contiguous().clone() for k, v in out.items()}


def internlm2_config_json(cfg):
    """The keys of the published internlm2_5-7b-chat config.json, with this model's sizes. pad_token_id is null
    (the published 2 would make the remote code's nn.Embedding freeze that row, padding_idx, which MegaTrain does
    not model; see README)."""
    return {
        "architectures": ["InternLM2ForCausalLM"],
        "attn_implementation": "eager",
        "auto_map": {
            "AutoConfig": "configuration_internlm2.InternLM2Config",
            "AutoModelForCausalLM": "modeling_internlm2.InternLM2ForCausalLM",
            "AutoModel": "modeling_internlm2.InternLM2ForCausalLM",
        },
        "bias": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": cfg.hidden_act,
        "hidden_size": cfg.hidden_size,
        "initializer_range": cfg.initializer_range,
        "intermediate_size": cfg.intermediate_size,
        "max_position_embeddings": cfg.max_position_embeddings,
        "model_type": "internlm2",
        "num_attention_heads": cfg.num_attention_heads,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads,
        "pad_token_id": None,
        "pretraining_tp": 1,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_scaling": {"type": "dynamic", "factor": 2.0},
        "rope_theta": int(cfg.rope_parameters["rope_theta"]),
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "transformers_version": "4.41.0",
        "use_cache": False,
        "vocab_size": cfg.vocab_size,
    }


def baichuan_config_json(cfg, alibi):
    """The keys of the published Baichuan2-7B-Base / Baichuan2-13B-Base config.json (13B: no
    max_position_embeddings, which is how MegaTrain and the remote code tell ALiBi from RoPE)."""
    j = {
        "architectures": ["BaichuanForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_baichuan.BaichuanConfig",
            "AutoModelForCausalLM": "modeling_baichuan.BaichuanForCausalLM",
        },
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": cfg.hidden_act,
        "hidden_size": cfg.hidden_size,
        "initializer_range": cfg.initializer_range,
        "intermediate_size": cfg.intermediate_size,
        "max_position_embeddings": cfg.max_position_embeddings,
        "model_max_length": cfg.max_position_embeddings,
        "model_type": "baichuan",
        "num_attention_heads": cfg.num_attention_heads,
        "num_hidden_layers": cfg.num_hidden_layers,
        "pad_token_id": None,
        "rms_norm_eps": cfg.rms_norm_eps,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "transformers_version": "4.29.2",
        "use_cache": False,
        "vocab_size": cfg.vocab_size,
        "z_loss_weight": 0,
    }
    if alibi:
        del j["max_position_embeddings"]
    return j


def llama_config_from_internlm2(j):
    """The LlamaConfig a config.json written by internlm2_config_json() means. Dynamic NTK scaling changes the base
    only for sequences longer than max_position_embeddings (64), which no fixture reaches: plain RoPE."""
    assert j["rope_scaling"]["type"] == "dynamic" and MAX_SEQ_LEN <= j["max_position_embeddings"]
    return LlamaConfig(
        **dict(COMMON_MODEL, vocab_size=j["vocab_size"], hidden_size=j["hidden_size"],
               intermediate_size=j["intermediate_size"], num_hidden_layers=j["num_hidden_layers"],
               max_position_embeddings=j["max_position_embeddings"], hidden_act=j["hidden_act"]),
        num_attention_heads=j["num_attention_heads"], num_key_value_heads=j["num_key_value_heads"],
        rms_norm_eps=j["rms_norm_eps"], tie_word_embeddings=j["tie_word_embeddings"], attention_bias=j["bias"],
        mlp_bias=False, rope_parameters={"rope_type": "default", "rope_theta": float(j["rope_theta"])},
    )


def llama_config_from_baichuan(j):
    """The LlamaConfig a Baichuan config.json means (ALiBi models add patch_alibi on top)."""
    return LlamaConfig(
        **dict(COMMON_MODEL, vocab_size=j["vocab_size"], hidden_size=j["hidden_size"],
               intermediate_size=j["intermediate_size"], num_hidden_layers=j["num_hidden_layers"],
               max_position_embeddings=j.get("max_position_embeddings", j["model_max_length"]),
               hidden_act=j["hidden_act"]),
        num_attention_heads=j["num_attention_heads"], num_key_value_heads=j["num_attention_heads"],
        rms_norm_eps=j["rms_norm_eps"], tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},  # Baichuan's RotaryEmbedding: base 10000
    )


def _rms_norm(x, w, eps):
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(variance + eps))


def _rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def remote_code_loss(family, t, j, examples):
    """The causal-LM loss of one batch computed directly from the family's own tensors (`t`, family names) the way
    its published modeling code does it (modeling_internlm2.py: wqkv split by the "(h gs d)" rearrange, rotary with
    cos/sin indexed by position, logits / sqrt(head_dim); modeling_baichuan.py: W_pack split by unflatten(3, hidden),
    NormHead, and for the 13B its training-mode ALiBi mask: slopes·(j − i) from get_alibi_mask plus the finfo.min
    padding mask, clamped at finfo.min). An independent transcription, to check the Llama reference against."""
    input_ids, attention_mask, labels = collate(examples)
    batch, length = input_ids.shape
    hidden, heads = j["hidden_size"], j["num_attention_heads"]
    kv = j.get("num_key_value_heads", heads)
    d, group, eps = hidden // heads, heads // kv, j["rms_norm_eps"]
    neg = torch.finfo(torch.float32).min
    internlm2 = family == "internlm2"
    alibi = not internlm2 and "max_position_embeddings" not in j
    names = INTERNLM2_NAMES if internlm2 else BAICHUAN_NAMES
    layer = dict(names["layer"])

    if alibi:
        slopes = torch.Tensor(_get_interleave(heads))
        point = (torch.arange(length) - length + 1).unsqueeze(0).unsqueeze(0).expand(heads, length, -1)
        diag = torch.diag(point[0])
        point = point - diag.unsqueeze(0).unsqueeze(0).transpose(-1, -2)
        future = torch.triu(torch.zeros([length, length]).fill_(float("-inf")), 1)
        alibi_mask = future.unsqueeze(0) + slopes.unsqueeze(1).unsqueeze(1) * point
        m = attention_mask.to(torch.float32)
        m = torch.tril(torch.gt(m[:, :, None] * m[:, None, :], 0)) * torch.eq(m[:, :, None] - m[:, None, :], 0)
        inverted = 1.0 - m.unsqueeze(1).expand(batch, 1, length, length).to(torch.float32)
        inverted = inverted.masked_fill(inverted.to(torch.bool), neg)
        mask = inverted + alibi_mask.unsqueeze(0)
    else:
        causal = torch.tril(torch.ones(length, length, dtype=torch.bool))
        allowed = causal[None, None] & attention_mask.bool()[:, None, None, :]
        mask = torch.zeros(batch, 1, length, length).masked_fill(~allowed, neg)
        base = float(j.get("rope_theta", 10000.0))
        inv_freq = 1.0 / (base ** (torch.arange(0, d, 2).float() / d))
        freqs = torch.outer(torch.arange(length, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()

    x = F.embedding(input_ids, t[names["embedding"]])
    for i in range(j["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = _rms_norm(x, t[p + layer["input_layernorm.weight"]], eps)
        if internlm2:
            qkv = F.linear(h, t[p + "attention.wqkv.weight"]).reshape(batch, length, kv, group + 2, d)
            q = qkv[..., :group, :].reshape(batch, length, heads, d)
            k, v = qkv[..., -2, :], qkv[..., -1, :]
        else:
            proj = F.linear(h, t[p + "self_attn.W_pack.weight"])
            proj = proj.unflatten(-1, (3, hidden)).unsqueeze(0).transpose(0, -2).squeeze(-2)
            q, k, v = (proj[n].reshape(batch, length, heads, d) for n in range(3))
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if not alibi:
            q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(d) + mask
        if alibi:
            scores = torch.max(scores, torch.tensor(neg))
        probs = F.softmax(scores, dim=-1, dtype=torch.float32)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(batch, length, hidden)
        x = x + F.linear(out, t[p + layer["self_attn.o_proj.weight"]])
        h = _rms_norm(x, t[p + layer["post_attention_layernorm.weight"]], eps)
        gate = F.linear(h, t[p + layer["mlp.gate_proj.weight"]])
        up = F.linear(h, t[p + layer["mlp.up_proj.weight"]])
        x = x + F.linear(F.silu(gate) * up, t[p + layer["mlp.down_proj.weight"]])
    x = _rms_norm(x, t["model.norm.weight"], eps)
    w_out = t[names["lm_head"]] if internlm2 else F.normalize(t[names["lm_head"]])
    logits = F.linear(x, w_out)
    return F.cross_entropy(logits[..., :-1, :].reshape(-1, j["vocab_size"]), labels[..., 1:].reshape(-1))


# ----------------------------------------------------------------------------------------------
# The cases added with the per-layer model specs (one per new family).
# ----------------------------------------------------------------------------------------------

GEMMA_MODEL = {k: v for k, v in COMMON_MODEL.items() if k != "hidden_act"}  # Gemma configs say hidden_activation

CASES += [
    dict(
        case="gemma2",
        seed=5,
        model_cls=Gemma2ForCausalLM,
        config=Gemma2Config(
            **GEMMA_MODEL,
            hidden_activation="gelu_pytorch_tanh",
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            query_pre_attn_scalar=12,  # logit scale 12^-0.5, not head_dim^-0.5
            rms_norm_eps=1e-6,
            tie_word_embeddings=True,
            sliding_window=5,  # layer_types default: layers 0 and 2 slide, layer 1 is global
            attn_logit_softcapping=2.0,
            final_logit_softcapping=3.0,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        ),
        # Gemma norms compute x̂·(1 + w): w ~ normal(0, 0.1). q/k projections ×5 and the final norm at 1 + w ≈ 5
        # make the attention and final logits large enough for both soft-caps to bend them (notes: how much).
        norm_center=0.0,
        init_scales={r"self_attn\.(q|k)_proj\.weight$": (5.0, 0.0), r"^model\.norm\.weight$": (1.0, 4.0)},
        loss_band=1.0,
        alt_attention="fixture_alt",  # Gemma 2 has no SDPA path (soft-capping); see cross_check_sdpa
        training=dict(lr_scheduler="cosine", warmup_steps=1, min_lr_ratio=0.1, max_grad_norm=1.0),
    ),
    dict(
        case="gemma3",
        seed=6,
        model_cls=Gemma3ForCausalLM,
        config=Gemma3TextConfig(
            **dict(GEMMA_MODEL, num_hidden_layers=4),
            hidden_activation="gelu_pytorch_tanh",
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            query_pre_attn_scalar=16,
            rms_norm_eps=1e-6,
            tie_word_embeddings=False,
            sliding_window=5,
            sliding_window_pattern=3,
            layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
            rope_parameters={
                "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
            },
        ),
        norm_center=0.0,
        training=dict(lr_scheduler="linear", warmup_steps=1, min_lr_ratio=0.0, max_grad_norm=1.0),
    ),
    dict(
        case="phi3",
        seed=13,  # padded batch lengths 16, 14, 20, 18: short factors on steps 1-2 (16 is not > 16), long on 3-4
        model_cls=Phi3ForCausalLM,
        config=Phi3Config(
            **COMMON_MODEL,
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            partial_rotary_factor=0.5,  # head_dim 8: rotary dim 4, two frequencies
            original_max_position_embeddings=16,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attention_dropout=0.0,
            rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                             "short_factor": [1.1, 1.3], "long_factor": [2.5, 7.0]},
        ),
        training=dict(lr_scheduler="cosine", warmup_steps=0, min_lr_ratio=0.0, max_grad_norm=1.0),
    ),
    dict(
        case="glm4",
        seed=8,
        model_cls=Glm4ForCausalLM,
        config=Glm4Config(
            **COMMON_MODEL,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,  # rotary dim 8 (4 interleaved pairs), 8 dims pass through
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            attention_bias=True,
            partial_rotary_factor=0.5,
            rope_parameters={"rope_type": "default", "rope_theta": 100.0},
        ),
        # The 8 pass-through (unrotated) dims of k_proj.bias get a zero gradient in exact arithmetic (softmax is
        # invariant to a key offset that every key shares): the parity rule's float64 clause judges them.
        training=dict(lr_scheduler="linear", warmup_steps=0, min_lr_ratio=0.0, max_grad_norm=1.0),
    ),
    dict(
        case="internlm2",
        seed=9,
        model_cls=LlamaForCausalLM,
        config=LlamaConfig(
            **COMMON_MODEL,
            num_attention_heads=4,
            num_key_value_heads=2,  # group 2: wqkv rows [q0 q1 k0 v0 | q2 q3 k1 v1]
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            attention_bias=False,
            mlp_bias=False,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        ),
        export=dict(architecture="InternLM2ForCausalLM", family="internlm2", lm_head="output.weight",
                    to_hf=internlm2_to_hf, from_hf=internlm2_from_hf, config_json=internlm2_config_json,
                    llama_config=llama_config_from_internlm2),
        trust_remote_code=True,
        training=dict(lr_scheduler="cosine", warmup_steps=1, min_lr_ratio=0.1, max_grad_norm=1.0),
    ),
    dict(
        case="baichuan2_7b",
        seed=10,
        model_cls=LlamaForCausalLM,
        config=LlamaConfig(
            **COMMON_MODEL,
            num_attention_heads=4,
            num_key_value_heads=4,
            rms_norm_eps=1e-6,
            tie_word_embeddings=False,
            attention_bias=False,
            mlp_bias=False,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        ),
        patch=patch_norm_head,
        export=dict(architecture="BaichuanForCausalLM", family="baichuan", lm_head="lm_head.weight",
                    to_hf=baichuan_to_hf, from_hf=baichuan_from_hf,
                    config_json=lambda cfg: baichuan_config_json(cfg, alibi=False),
                    llama_config=llama_config_from_baichuan),
        loss_band=1.0,  # NormHead: unit-length rows make the initial logits larger than a 0.05-normal head's
        trust_remote_code=True,
        training=dict(lr_scheduler="linear", warmup_steps=0, min_lr_ratio=0.0, max_grad_norm=1.0),
    ),
    dict(
        case="baichuan2_13b",
        seed=11,
        model_cls=LlamaForCausalLM,
        config=LlamaConfig(
            **dict(COMMON_MODEL, hidden_size=48, intermediate_size=48, num_hidden_layers=2),
            num_attention_heads=6,  # not a power of two: slopes 1/4, 1/16, 1/64, 1/256 (of 4) + 1/2, 1/8 (of 8)
            num_key_value_heads=6,
            rms_norm_eps=1e-6,
            tie_word_embeddings=False,
            attention_bias=False,
            mlp_bias=False,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},  # unused: patch_alibi removes RoPE
        ),
        patch=patch_baichuan2_13b,
        export=dict(architecture="BaichuanForCausalLM", family="baichuan", lm_head="lm_head.weight",
                    to_hf=baichuan_to_hf, from_hf=baichuan_from_hf,
                    config_json=lambda cfg: baichuan_config_json(cfg, alibi=True),
                    llama_config=llama_config_from_baichuan),
        loss_band=1.0,  # NormHead: unit-length rows make the initial logits larger than a 0.05-normal head's
        trust_remote_code=True,
        training=dict(lr_scheduler="cosine", warmup_steps=0, min_lr_ratio=0.0, max_grad_norm=1.0),
    ),
]
ORIGINAL_CASES = ("llama", "qwen2", "qwen3", "mistral")


# ----------------------------------------------------------------------------------------------
# Initial weights and data
# ----------------------------------------------------------------------------------------------


def build_model(spec):
    """Construct the model with torch.manual_seed(seed), then perturb every parameter. Cases may centre the norm
    weights elsewhere (norm_center: 0 for Gemma's (1 + w) norms), rescale or shift named tensors afterwards
    (init_scales: regex -> (multiplier, offset)) and patch the model (patch: Baichuan's NormHead and ALiBi)."""
    torch.manual_seed(spec["seed"])
    config = spec["config"]
    config._attn_implementation = "eager"
    model = spec["model_cls"](config).to(torch.float32)
    gen = torch.Generator().manual_seed(1000 + spec["seed"])
    norm_center = spec.get("norm_center", 1.0)
    init_scales = spec.get("init_scales", {})
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied weights appear once
            if p.ndim == 2:  # embeddings, projections, lm_head
                value = torch.randn(p.shape, generator=gen) * 0.05
            elif name.endswith(".bias"):
                value = torch.randn(p.shape, generator=gen) * 0.05
            elif p.ndim == 1 and "norm" in name:  # input/post-attention norms, q_norm/k_norm, model.norm
                value = norm_center + torch.randn(p.shape, generator=gen) * 0.1
            else:
                raise RuntimeError(f"unexpected parameter {name} {tuple(p.shape)}")
            for pattern, (multiplier, offset) in init_scales.items():
                if re.search(pattern, name):
                    value = value * multiplier + offset
            p.copy_(value)
    if "patch" in spec:
        spec["patch"](model)
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
    mask_fn = getattr(model, "_fixture_attention_mask", None)  # baichuan2_13b: the 4D ALiBi mask (patch_alibi)
    if mask_fn is not None:
        attention_mask = mask_fn(attention_mask)
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
# The float64 reference: the same run in float64 end to end (what the parity check measures distances from)
# ----------------------------------------------------------------------------------------------


class Float64Everywhere(TorchFunctionMode):
    """Inside it, every float32 a model asks for is float64: x.float(), x.to(torch.float32), softmax(dtype=float32),
    tensors created as float32. transformers upcasts explicitly to float32 in its norms, softmaxes, rotary tables,
    Gated DeltaNet gates and gated-delta-rule fallbacks; a model.double() run without this computes those in float32."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.float:
            func = torch.Tensor.double
        args = tuple(torch.float64 if a is torch.float32 else a for a in args)
        kwargs = {k: torch.float64 if v is torch.float32 else v for k, v in (kwargs or {}).items()}
        return func(*args, **kwargs)


def fp64_run(model, run):
    """run(model) with the model in float64 end to end (Float64Everywhere, float64 default dtype; MoE models with
    transformers' eager experts, whose loop over experts takes any dtype); returns run's result. The model is
    converted in place."""
    model.to(torch.float64)
    if model._can_set_experts_implementation():
        model.set_experts_implementation("eager")
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float64Everywhere():
            return run(model)
    finally:
        torch.set_default_dtype(previous)


def write_fp64_reference(out, final, losses):
    """reference/final_fp64.safetensors (F64, the fp32 reference's names) when the float64 run is finite; returns
    reference.json's "fp64" entry: its losses and whether it is finite (a non-finite one is not written and the
    parity check keeps the fp32 rule for the case)."""
    finite = all(math.isfinite(x) for x in losses) and all(bool(torch.isfinite(v).all()) for v in final.values())
    if finite:
        save_file({k: v.detach().to(torch.float64).contiguous() for k, v in final.items()},
                  str(out / "reference" / "final_fp64.safetensors"), metadata={"format": "pt"})
    return {"finite": finite, "losses": losses}


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
            "trust_remote_code": spec.get("trust_remote_code", False),
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


# ----------------------------------------------------------------------------------------------
# Probes of the new families' quirks (run on separate model instances, never on the recorded run)
# ----------------------------------------------------------------------------------------------


def fixture_alt_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, softcap=None,
                          **kwargs):
    """Eager attention's math in another fp32 rounding order (q pre-scaled, einsum products): the second code path
    of the cross-check for Gemma 2, which has no SDPA path (soft-capping)."""
    n_rep = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(n_rep, dim=1), value.repeat_interleave(n_rep, dim=1)
    if scaling is None:
        scaling = module.head_dim**-0.5
    scores = torch.einsum("bhqd,bhkd->bhqk", query * scaling, key)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.einsum("bhqk,bhkd->bhqd", probs, value).transpose(1, 2).contiguous(), probs


_SOFTCAP_PROBE = []


def fixture_probe_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, softcap=None,
                            **kwargs):
    """Eager attention that also records, for the soft-cap check, the scaled logits / softcap at visible keys."""
    from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward
    n_rep = query.shape[1] // key.shape[1]
    raw = torch.matmul(query, key.repeat_interleave(n_rep, dim=1).transpose(2, 3)) * scaling
    visible = (attention_mask == 0).expand_as(raw)
    _SOFTCAP_PROBE.append((raw / softcap)[visible].detach())
    return eager_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                   softcap=softcap, **kwargs)


AttentionInterface.register("fixture_alt", fixture_alt_attention)
AttentionInterface.register("fixture_probe", fixture_probe_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register("fixture_alt", eager_mask)
ALL_MASK_ATTENTION_FUNCTIONS.register("fixture_probe", eager_mask)


def _saturation(values):
    a = values.abs()
    return {"max_abs_over_cap": round(a.max().item(), 3), "fraction_over_cap": round((a > 1).float().mean().item(), 4),
            "fraction_over_half_cap": round((a > 0.5).float().mean().item(), 4)}


def _batches(examples, t):
    bs = t["batch_size"]
    return [examples[k * bs:(k + 1) * bs] for k in range(t["num_steps"])]


def case_notes(spec, examples, t):
    """Checks of what the case is meant to exercise; raises if the fixture would not exercise it."""
    case = spec["case"]
    batches = _batches(examples, t)
    lengths = [max(len(ex["input_ids"]) for ex in b) for b in batches]
    notes = {"padded_lengths": lengths}
    cfg = spec["config"]
    if case == "gemma2":
        model = build_model(spec)
        model.config._attn_implementation = "fixture_probe"
        captured = []
        model.lm_head.register_forward_hook(lambda m, i, o: captured.append(o.detach()))
        _SOFTCAP_PROBE.clear()
        input_ids, attention_mask, labels = collate(batches[0])
        with torch.no_grad():
            model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        attn = torch.cat(_SOFTCAP_PROBE)
        final = captured[0][attention_mask.bool()] / cfg.final_logit_softcapping
        notes["step1_attention_logits_over_softcap"] = _saturation(attn)
        notes["step1_final_logits_over_softcap"] = _saturation(final)
        for what in ("step1_attention_logits_over_softcap", "step1_final_logits_over_softcap"):
            if not 0.02 < notes[what]["fraction_over_cap"] < 0.8:
                raise RuntimeError(f"gemma2: soft-cap not partly saturated: {what} {notes[what]}")
        notes["layer_types"] = cfg.layer_types
        if max(lengths) <= cfg.sliding_window:
            raise RuntimeError("gemma2: no sequence is longer than the sliding window")
    elif case == "gemma3":
        rot = build_model(spec).model.rotary_emb
        full, local = rot.full_attention_inv_freq, rot.sliding_attention_inv_freq
        notes["layer_types"] = cfg.layer_types
        notes["inv_freq"] = {"full_attention": full.tolist(), "sliding_attention": local.tolist()}
        if torch.equal(full, local) or len(set(cfg.layer_types)) != 2:
            raise RuntimeError("gemma3: the two layer types must differ in rope")
    elif case == "phi3":
        rot = build_model(spec).model.rotary_emb
        original = cfg.rope_parameters["original_max_position_embeddings"]
        used = []
        for length in lengths:
            position_ids = torch.arange(length)[None]
            rot(torch.zeros(1, length, cfg.hidden_size), position_ids)
            long = torch.equal(rot.inv_freq, rot.long_inv_freq)
            if long == torch.equal(rot.inv_freq, rot.original_inv_freq) or long != (length > original):
                raise RuntimeError(f"phi3: unexpected longrope choice at length {length}")
            used.append("long" if long else "short")
        notes["longrope_factors_by_step"] = used
        notes["attention_scaling"] = rot.attention_scaling
        notes["inv_freq"] = {"short": rot.original_inv_freq.tolist(), "long": rot.long_inv_freq.tolist()}
        if len(set(used)) != 2:
            raise RuntimeError(f"phi3: the steps must use both factor sets, got {used}")
    elif case == "glm4":
        notes["rotary_dim"] = int(cfg.head_dim * cfg.rope_parameters["partial_rotary_factor"])
    if "export" in spec:
        notes.update(remote_code_check(spec, batches))
    return notes


def remote_code_check(spec, batches):
    """The Llama reference against remote_code_loss() on the family's own tensors read back from model.safetensors:
    loss and every gradient, per batch, at the initial weights; and the wqkv grouping of InternLM2 is not the
    plain q | k | v concatenation."""
    export = spec["export"]
    out = FIXTURES / spec["case"] / "model"
    j = json.loads((out / "config.json").read_text())
    tensors = load_file(out / "model.safetensors")
    loss_rel, grad_rel = 0.0, 0.0
    for batch in batches:
        model = build_model(spec)
        loss = batch_loss(model, batch)
        loss.backward()
        grads = export["to_hf"]({n: p.grad for n, p in model.named_parameters()}, model.config)
        t = {k: v.clone().requires_grad_(True) for k, v in tensors.items()}
        theirs = remote_code_loss(export["family"], t, j, batch)
        theirs.backward()
        loss_rel = max(loss_rel, abs(theirs.item() - loss.item()) / loss.item())
        for k, g in grads.items():
            grad_rel = max(grad_rel, ((t[k].grad - g).norm() / g.norm()).item())
    if loss_rel > 1e-6 or grad_rel > 1e-5:
        raise RuntimeError(f"{spec['case']}: the Llama reference differs from the family's modeling code: "
                           f"loss {loss_rel:.1e}, gradients {grad_rel:.1e}")
    notes = {"remote_code_check": {"max_loss_rel_diff": float(f"{loss_rel:.2e}"),
                                   "max_gradient_rel_diff": float(f"{grad_rel:.2e}")}}
    if export["family"] == "internlm2":
        cfg = spec["config"]
        w = tensors["model.layers.0.attention.wqkv.weight"]
        plain = build_model(spec).state_dict()
        flat = torch.cat([plain[f"model.layers.0.self_attn.{n}_proj.weight"] for n in "qkv"])
        if torch.equal(w, flat):
            raise RuntimeError("internlm2: the grouped wqkv equals plain q|k|v; the grouping is not exercised")
        group = cfg.num_attention_heads // cfg.num_key_value_heads
        notes["wqkv_head_blocks"] = " | ".join(
            " ".join([f"q{h * group + g}" for g in range(group)] + [f"k{h}", f"v{h}"])
            for h in range(cfg.num_key_value_heads))
    if spec["case"] == "baichuan2_13b":
        notes["alibi_slopes"] = _get_interleave(spec["config"].num_attention_heads)
    return notes


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
    export = spec.get("export")
    if export:  # a trust_remote_code family: its own config.json and tensor names
        write_json(out / "model" / "config.json", export["config_json"](model.config))
        save_file(export["to_hf"](model.state_dict(), model.config), str(out / "model" / "model.safetensors"),
                  metadata={"format": "pt"})
    else:
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

    # What the script checks about the case's quirks (on separate model instances; the run below is untouched).
    notes = case_notes(spec, examples, t) if spec["case"] not in ORIGINAL_CASES else None

    # Train.
    losses, grad_norms, lrs = train(model, examples, t)

    # Final parameters (state_dict drops tied duplicates the same way save_pretrained does).
    saved_keys = set(load_file(out / "model" / "model.safetensors").keys())
    if export:
        final = export["to_hf"](model.state_dict(), model.config)
    else:
        final = {k: v.detach().to(torch.float32).contiguous().clone()
                 for k, v in model.state_dict().items() if k in saved_keys}
    missing = saved_keys - set(final)
    if missing:
        raise RuntimeError(f"{case}: parameters missing from the final state: {sorted(missing)}")
    save_file(final, str(out / "reference" / "final.safetensors"), metadata={"format": "pt"})

    # The same run in float64 from the same initial weights (build_model is deterministic).
    model64 = build_model(spec)
    losses64 = fp64_run(model64, lambda m: train(m, examples, t)[0])
    if export:
        final64 = export["to_hf"](model64.state_dict(), model64.config)
    else:
        final64 = {k: v for k, v in model64.state_dict().items() if k in saved_keys}

    reference = {
        "case": case,
        "architecture": export["architecture"] if export else spec["model_cls"].__name__,
        "training": {k: t[k] for k in (
            "batch_size", "num_steps", "learning_rate", "lr_scheduler", "warmup_steps", "min_lr_ratio",
            "weight_decay", "max_grad_norm", "beta1", "beta2", "eps")},
        "losses": losses,
        "grad_norms": grad_norms,
        "lrs": lrs,
    }
    if export:
        reference["reference_model"] = spec["model_cls"].__name__
    if notes is not None:
        reference["notes"] = notes
    reference["fp64"] = write_fp64_reference(out, final64, losses64)
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
    export = spec.get("export")
    if export:  # no transformers class: the Llama that config.json means, with the file's weights converted back
        cfg_json = json.loads((out / "model" / "config.json").read_text())
        llama_cfg = export["llama_config"](cfg_json)
        llama_cfg._attn_implementation = "eager"
        model = LlamaForCausalLM(llama_cfg).to(torch.float32)
        model.load_state_dict(export["from_hf"](load_file(out / "model" / "model.safetensors"), llama_cfg), strict=True)
        if "patch" in spec:
            spec["patch"](model)
        report(cfg_json["architectures"] == [export["architecture"]] and cfg_json["model_type"] == export["family"],
               f"config.json says {cfg_json['architectures']} / model_type {cfg_json['model_type']}")
    else:
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
    head = export["lm_head"] if export else "lm_head.weight"
    report((head in init) != tied, f"tie_word_embeddings={tied}, {head} in file: {head in init}")
    final = load_file(out / "reference" / "final.safetensors")
    if export:  # the conversion round trip, both ways, bit for bit
        cfg = spec["config"]
        built = build_model(spec).state_dict()
        back = export["from_hf"](init, cfg)
        report(set(back) == set(built) and all(torch.equal(back[k], built[k]) for k in built),
               f"model.safetensors converted back to Llama names equals the Llama reference's initial weights exactly")
        for what, tensors in (("model.safetensors", init), ("final.safetensors", final)):
            again = export["to_hf"](export["from_hf"](tensors, cfg), cfg)
            report(set(again) == set(tensors) and all(torch.equal(again[k], tensors[k]) for k in tensors),
                   f"{what}: {export['family']} -> llama -> {export['family']} is the identity")
        report(all(v.is_contiguous() for v in init.values()), "tensors contiguous")
    report(set(final) == set(init) and all(final[k].shape == init[k].shape for k in init),
           "final.safetensors has the same names/shapes as the initial weights")
    changed = sum(not torch.equal(final[k], init[k]) for k in init)
    report(changed == len(init), f"{changed}/{len(init)} tensors changed by training")

    # 3. Losses near ln(128) and changing.
    losses = ref["losses"]
    band = spec.get("loss_band", 0.5)
    report(all(abs(l - math.log(VOCAB)) < band for l in losses),
           f"losses within {band} of ln(128)={math.log(VOCAB):.4f}")
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
    if spec.get("alt_attention") == "fixture_alt":  # no SDPA path: eager's math in another order instead
        model.config._attn_implementation = "fixture_alt"
    else:
        model.set_attn_implementation("sdpa")
    losses, _, _ = train(model, examples, t)
    ref = json.loads((FIXTURES / case / "reference.json").read_text())
    final = load_file(FIXTURES / case / "reference" / "final.safetensors")
    state = model.state_dict()
    if "export" in spec:
        state = spec["export"]["to_hf"](state, model.config)
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
        res = results[spec["case"]]
        if "sdpa" not in res:  # not regenerated in this run: the row as the previous README had it
            if res.get("sdpa_row"):
                xrows.append(res["sdpa_row"])
            continue
        loss_rel, rels = res["sdpa"]
        worst = ", ".join(f"`{k}` {r:.1e}" for r, k in rels[:2])
        xrows.append(f"| `{spec['case']}` | {loss_rel:.1e} | {worst} |")
    notes = {spec["case"]: results[spec["case"]]["reference"].get("notes", {}) for spec in CASES}
    g2, g3, p3 = notes["gemma2"], notes["gemma3"], notes["phi3"]
    g2a, g2f = g2["step1_attention_logits_over_softcap"], g2["step1_final_logits_over_softcap"]
    phi3_steps = ", ".join(f"step {k + 1}: length {n}, {w}" for k, (n, w) in
                           enumerate(zip(p3["padded_lengths"], p3["longrope_factors_by_step"])))
    fmt = lambda xs: "[" + ", ".join(f"{x:.6g}" for x in xs) + "]"  # noqa: E731
    remote = {c: notes[c]["remote_code_check"] for c in ("internlm2", "baichuan2_7b", "baichuan2_13b")}
    remote_rows = "\n".join(f"| `{c}` | {r['max_loss_rel_diff']:.1e} | {r['max_gradient_rel_diff']:.1e} |"
                            for c, r in remote.items())
    seeds = ", ".join(f"`{spec['case']}` {spec['seed']}" for spec in CASES)
    text = f"""# Golden training fixtures

Written by `tools/make_fixtures.py` (run by hand, never by CI: `python3 tools/make_fixtures.py` from the
repository root; `python3 tools/make_fixtures.py CASE...` regenerates only the named cases and keeps the others'
files and README rows). Generated with Python {sys.version.split()[0]}, torch {torch.__version__},
transformers {transformers.__version__}, safetensors {safetensors.__version__}, on CPU, one thread,
`torch.use_deterministic_algorithms(True)`, float32 throughout. (The same versions on another CPU can differ in
the last bits: torch's CPU kernels are deterministic per machine, not across machines. The first four cases were
generated on another machine than the others; regenerate a case only when its semantics change.)

Every case is a tiny decoder-only model: vocab 128, hidden 32, intermediate 64, 3 layers,
max_position_embeddings 64, `attn_implementation` "eager", fp32 (the case table says where a case differs). It is
trained for 4 optimizer steps of batch 4 (16 pre-tokenized examples, lengths 3..20, step k uses lines 4k..4k+3 of
`data/train.jsonl`).

## Cases

| case | architecture | what it covers |
|---|---|---|
| `llama` | LlamaForCausalLM | 4 heads / 2 kv heads (GQA), untied lm_head, rms_norm_eps 1e-5, **llama3 rope scaling** (factor 8, low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 16, rope_theta 1e4). `config.json` is in the **old format** (top-level `rope_theta` + `rope_scaling`, no `rope_parameters`); transformers loads it to the identical loss. Cosine schedule with 1 warmup step (lr 0 on the first step) and min_lr_ratio 0.1, clipping at 1.0. |
| `qwen2` | Qwen2ForCausalLM | 4 heads / 1 kv head (MQA), **tied embeddings** (no `lm_head.weight` in either safetensors file), **q/k/v biases**, default rope with rope_theta 100 (see below), rms_norm_eps 1e-6. Linear schedule, no warmup, min_lr_ratio 0, clipping at 1.0. |
| `qwen3` | Qwen3ForCausalLM | 4 heads / 2 kv heads, **explicit head_dim 16** (q_proj is 64x32, o_proj 32x64), **qk-norm** (`q_norm`/`k_norm` RMSNorm over head_dim, applied before rope), untied, **linear rope scaling** (factor 2, rope_theta 1e4). Constant schedule with 2 warmup steps (lrs 0, 0.5e-3, 1e-3, 1e-3), **max_grad_norm 0: no clipping**, but the grad norm is still computed and recorded. |
| `mistral` | MistralForCausalLM | 4 heads / 2 kv heads, untied, **sliding_window 5** (query i sees keys j with i-5 < j <= i), **yarn rope** (factor 4, original_max_position_embeddings 16, rope_theta 1e4; beta_fast 32 / beta_slow 1 defaults; attention_factor 0.1*ln(4)+1 multiplies both cos and sin). Cosine schedule, no warmup, min_lr_ratio 0, clipping at 1.0. |
| `gemma2` | Gemma2ForCausalLM | 4 heads / 2 kv heads, head_dim 8, **sandwich norms** (`input_layernorm`, `post_attention_layernorm` on the attention output, `pre_feedforward_layernorm`, `post_feedforward_layernorm` on the MLP output), **(1 + w) RMSNorms** everywhere, **embeddings × √32** (in the compute dtype), **GELU-tanh GLU** (`hidden_activation` gelu_pytorch_tanh), **query_pre_attn_scalar 12** (logit scale 12^-½, not head_dim^-½), **attn_logit_softcapping 2** and **final_logit_softcapping 3**, both active (see below), **sliding_window 5 on layers 0 and 2** (default `layer_types`: sliding, full, sliding), **tied embeddings**, rope_theta 1e4. Cosine schedule with 1 warmup step, min_lr_ratio 0.1, clipping at 1.0. |
| `gemma3` | Gemma3ForCausalLM (`gemma3_text`) | **4 layers**, `layer_types` sliding, sliding, full, sliding (given explicitly; `sliding_window_pattern` 3 says the same), sliding_window 5, 4 heads / 2 kv heads, head_dim 8, query_pre_attn_scalar 16, **q/k norm** ((1 + w) RMSNorm over head_dim before rope), sandwich and (1 + w) norms, embeddings × √32, GELU-tanh GLU, no soft-caps, **untied** lm_head, **rope per layer type** (`rope_parameters.full_attention`: linear, factor 2, theta 1e4, inv_freq {fmt(g3['inv_freq']['full_attention'])}; `sliding_attention`: default, theta 100, inv_freq {fmt(g3['inv_freq']['sliding_attention'])}). Linear schedule with 1 warmup step, clipping at 1.0. |
| `phi3` | Phi3ForCausalLM | 4 heads / 2 kv heads (GQA), **fused `qkv_proj`** (rows q \\| k \\| v, 64x32) and **fused `gate_up_proj`** (rows gate \\| up, 128x32), **partial_rotary_factor 0.5** (rotary dim 4 of head_dim 8: the first 4 dims rotate, rotate-half within them), **longrope** (rope_theta 1e4, short_factor [1.1, 1.3], long_factor [2.5, 7.0], original_max_position_embeddings 16, max_position_embeddings 64: factor 4, attention_factor sqrt(1 + ln 4 / ln 16) = {p3['attention_scaling']:.7f} on cos and sin for both factor sets). transformers picks the set per forward from the batch's max position + 1 (the padded length): {phi3_steps}. Seed 13 was chosen for that mix (and for step 1's boundary case, 16 = original, which is short). Cosine schedule, no warmup, clipping at 1.0. |
| `glm4` | Glm4ForCausalLM | 4 heads / 2 kv heads, **explicit head_dim 16**, **interleaved partial rotary** (partial_rotary_factor 0.5: the first 8 dims rotate as pairs (2i, 2i+1) with frequency i, the other 8 pass through), rope_theta 100, **q/k/v biases** (no o_proj bias), **post_self_attn_layernorm / post_mlp_layernorm** on the block outputs (`post_attention_layernorm` is the pre-MLP norm), **fused `gate_up_proj`**, untied, rms_norm_eps 1e-5. Linear schedule, no warmup, clipping at 1.0; the pass-through half of `k_proj.bias` has a zero gradient in exact arithmetic (see below). |
| `internlm2` | InternLM2ForCausalLM (trust_remote_code) | 4 heads / 2 kv heads (GQA, group 2), untied, rms_norm_eps 1e-5, rope_theta 1e6 (integer in config.json, as published), `rope_scaling` {{"type": "dynamic", "factor": 2.0}} (inactive: every sequence is shorter than max_position_embeddings 64), `bias` false. InternLM2's names: `model.tok_embeddings`, `model.layers.N.attention.wqkv` **grouped by kv head** (per kv head its 2 q heads, its k head, its v head: {notes['internlm2']['wqkv_head_blocks'].replace('|', chr(92) + '|')}), `attention.wo`, `feed_forward.w1`/`w3`/`w2` (gate/up/down), `attention_norm`, `ffn_norm`, `model.norm`, `output`. `train.yaml` sets `model.trust_remote_code: true`. Cosine schedule with 1 warmup step, min_lr_ratio 0.1, clipping at 1.0. |
| `baichuan2_7b` | BaichuanForCausalLM (trust_remote_code) | Baichuan 2 7B: 4 heads (no GQA), **`W_pack`** (rows q \\| k \\| v, 96x32), **NormHead** (logits = x · normalize(W_lm)ᵀ, rows normalised to unit length on every training forward), RoPE theta 1e4, max_position_embeddings and model_max_length 64, z_loss_weight 0. `model.trust_remote_code: true`. Linear schedule, no warmup, clipping at 1.0. |
| `baichuan2_13b` | BaichuanForCausalLM (trust_remote_code) | Baichuan 2 13B: **no `max_position_embeddings`** (model_max_length 64 instead), which selects **ALiBi and no RoPE**; **6 heads** (hidden 48, head_dim 8; 2 layers and intermediate 48 to keep each file under 200 KB), so the slopes are not one power-of-two series: {notes['baichuan2_13b']['alibi_slopes']} (`_get_interleave(6)`: the 4-head series, then every other slope of the 8-head series); W_pack, NormHead. `model.trust_remote_code: true`. Cosine schedule, no warmup, clipping at 1.0. |

| case | lr_scheduler | warmup_steps | min_lr_ratio | max_grad_norm | lrs used by steps 1..4 |
|---|---|---|---|---|---|
{chr(10).join(rows)}

All cases: learning_rate 1e-3, AdamW (betas 0.9/0.999, eps 1e-8), weight_decay 0.1 on
parameters with ndim >= 2 and 0 on 1-D parameters (norm weights, biases).

Initial weights: the model is constructed under `torch.manual_seed(seed)` (seeds: {seeds}),
then every 2-D matrix (embeddings, projections, lm_head) is set to normal(0, 0.05), every bias to
normal(0, 0.05), every norm weight (layer norms, q_norm/k_norm, model.norm) to 1 + normal(0, 0.1); Gemma's
(1 + w) norms get w = normal(0, 0.1) instead (the same effective scale). `gemma2` then multiplies its q_proj and
k_proj weights by 5 and adds 4 to model.norm.weight, so that both soft-caps bend the logits (below).
About half the examples (every odd line) carry `labels` whose first k tokens (1 <= k <= len-2) are -100;
the others omit `labels` (labels = input_ids). Every config.json has `pad_token_id` null: transformers (and the
InternLM2 / Baichuan remote code) build `nn.Embedding(..., padding_idx=pad_token_id)`, which never updates that
row; MegaTrain does not model padding_idx, so the fixtures keep it out of the comparison.

## Files per case

- `model/config.json`, `model/model.safetensors`: the initial fp32 weights (`save_pretrained`; for the
  trust_remote_code families the family's own config.json and tensor names, see below).
- `data/dataset_info.json` (`{{"fixture": {{"file_name": "train.jsonl", "formatting": "tokenized"}}}}`),
  `data/train.jsonl`.
- `reference.json`: the hyper-parameters plus per-step `losses`, `grad_norms` (total L2 norm of all
  gradients before clipping) and `lrs` (the lr used by that step's optimizer update). The cases after `mistral` add
  `notes` (what the script checked: padded lengths, soft-cap saturation, longrope choices, rope tables, the
  remote-code comparison) and the trust_remote_code ones `reference_model` (LlamaForCausalLM).
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
  they must simply not produce NaN (their gradients are exactly zero). `gemma2` and `gemma3` use the same window
  on their sliding layers only.
- RoPE (`modeling_rope_utils.py`), rotate-half convention, positions 0..T-1 per example:
  - llama3: inv_freq = theta^(-2i/d); wavelen = 2 pi / inv_freq; wavelen > orig/low_freq_factor (16):
    inv_freq / factor; wavelen < orig/high_freq_factor (4): unchanged; otherwise
    (1 - s) inv_freq / factor + s inv_freq with s = (orig / wavelen - low) / (high - low).
    Here inv_freq = [0.57606, 0.0125, 0.00125, 0.000125] (pair 0 smoothed, the rest divided by 8).
  - linear (`qwen3`, the full layer of `gemma3`): inv_freq / factor.
  - yarn (`mistral`): beta_fast 32, beta_slow 1, truncate true: low = max(floor(d ln(orig/(32*2 pi)) /
    (2 ln theta)), 0), high = min(ceil(d ln(orig/(1*2 pi)) / (2 ln theta)), d - 1) (here 0 and 1);
    ramp_i = clamp((i - low) / (high - low), 0, 1) over i < d/2; inv_freq = (theta^(-2i/d) / factor) ramp_i
    + theta^(-2i/d) (1 - ramp_i) = [1, 0.025, 0.0025, 0.00025]. attention_factor = 0.1 ln(factor) + 1 =
    1.1386294 (no mscale keys) multiplies BOTH cos and sin, so q.k logits are scaled by its square; the
    softmax scale stays 1/sqrt(head_dim).
  - longrope (`phi3`): inv_freq = 1 / (ext_i · theta^(2i/d)) over the rotary dim d = 4, ext = short_factor when
    the batch's max position + 1 <= original_max_position_embeddings, else long_factor; short inv_freq
    {fmt(p3['inv_freq']['short'])}, long {fmt(p3['inv_freq']['long'])}; cos and sin × attention_factor either way.
    The dims past the rotary dim pass through unchanged.
  - interleaved partial (`glm4`): cos/sin of frequency i (over the rotary dim 8) act on dims 2i and 2i+1
    (`rotate_half` = (-x1, x0, -x3, x2, ...)); dims 8..15 pass through.
- `qwen3` and `gemma3` apply q_norm/k_norm (RMSNorm over head_dim) per head before rope; Gemma's is (1 + w).
- Gemma (`gemma2`, `gemma3`): RMSNorm computes x̂·(1 + w) in fp32; the embedding output is multiplied by
  torch.tensor(32 ** 0.5) cast to the compute dtype; the GLU is gelu_tanh(gate) · up. `gemma2`'s attention logits
  are (q·k) · 12^-½, then 2·tanh(logit / 2), then the mask; its final logits 3·tanh(logits / 3) before the loss.
  At step 1 the scaled attention logits over visible keys reach {g2a['max_abs_over_cap']} × the cap
  ({100 * g2a['fraction_over_cap']:.1f}% of them beyond it, {100 * g2a['fraction_over_half_cap']:.1f}% beyond half), \
the final logits {g2f['max_abs_over_cap']} × the cap
  ({100 * g2f['fraction_over_cap']:.1f}% beyond, {100 * g2f['fraction_over_half_cap']:.1f}% beyond half): \
both tanh's are in their bent range.
- `clip_grad_norm_` scales by max_norm / (total_norm + 1e-6) when that is < 1.
- The first optimizer step of `llama`, `qwen3`, `gemma2`, `gemma3` and `internlm2` has lr 0 (warmup from 0):
  parameters do not move, but AdamW's moments and step count do advance.

## The trust_remote_code families (InternLM2, Baichuan 2)

transformers has no class for them, so the reference is a `LlamaForCausalLM` (eager, fp32) with the same math,
and the script writes the fixture in the family's format: config.json with the keys of the published
`internlm2_5-7b-chat` / `Baichuan2-7B-Base` / `Baichuan2-13B-Base` configs (this model's sizes, `auto_map` included,
`pad_token_id` null) and model.safetensors / final.safetensors under the family's tensor names:

- InternLM2: the Llama tensors renamed (see the case table), q_proj / k_proj / v_proj packed into `wqkv` grouped
  by kv head, i.e. the order modeling_internlm2.py's `rearrange(qkv, "b q (h gs d) -> b q h gs d", gs=group + 2)`
  reads (q heads of kv head h are h·group .. h·group + group − 1, which is how Llama's repeat_kv pairs them).
- Baichuan 2: `W_pack` = q | k | v rows; lm_head's forward is replaced by Baichuan's NormHead in training mode,
  `F.linear(x, F.normalize(W))` (normalize over dim 1, eps 1e-12; the gradient flows through the normalisation).
- Baichuan 2 13B, additionally: the rotary embedding is patched to return cos = 1, sin = 0 (q and k pass
  unchanged), and the ALiBi bias enters as a 4D float attention mask [batch, heads, T, T]: slope_h·(j − i) for
  j <= i, −inf above the diagonal and on padding keys; eager attention adds it to (q·k)·8^-½ before the softmax.
  This is the bias Baichuan's training-mode `get_alibi_mask` builds (the position difference j − i; its
  inference-time `_gen_alibi_mask` uses slope·j, equal after the softmax). The reference follows the remote
  code's eager attention, not its optional xformers path (in the version transcribed here that path passes
  xformers only a causal mask).

How the references were checked (the script fails if any check fails):

1. **Equivalence to the family's own modeling code.** `remote_code_loss()` is an independent transcription of
   modeling_internlm2.py / modeling_baichuan.py (wqkv split by the rearrange above, W_pack split by
   `unflatten(-1, (3, hidden))`, cos/sin tables indexed by position, logits divided by sqrt(head_dim), NormHead,
   the 13B's training-mode mask: slopes·(j − i) plus the finfo.min padding mask, clamped at finfo.min, and the
   loss with z_loss_weight 0) that reads the family's tensors from model.safetensors. For every training batch at
   the initial weights its loss and every gradient are compared with the Llama reference's (converted to the
   family's names):

   | case | max loss rel diff | max gradient rel diff (per tensor) |
   |---|---|---|
{chr(10).join("   " + r for r in remote_rows.splitlines())}

   (fp32 rounding: the transcription divides by sqrt(head_dim) where Llama multiplies by its inverse, and so on.)
2. **The conversion round trip.** model.safetensors converted back to Llama names equals the Llama reference's
   initial weights bit for bit, and family -> Llama -> family is the identity on model.safetensors and
   final.safetensors.
3. **The files load to the recorded loss.** A Llama built from config.json alone (InternLM2: dynamic NTK scaling
   only applies past max_position_embeddings, so plain RoPE; Baichuan: ALiBi iff max_position_embeddings is
   absent) with the converted weights gives exactly the recorded step-1 loss.

## Tolerances used by the C++ tests

- Per-step loss and pre-clip gradient norm: relative error <= 1e-4 against `reference.json`.
- Every trained tensor, judged on its update (final − initial weights), `tests/integration/update_rule.h`: it
  passes if ||Δours − Δfp32|| <= 1e-3 ||Δfp32|| (PyTorch fp32's update, `reference/final.safetensors`), or if
  ||Δours − Δfp64|| <= 3 ||Δfp32 − Δfp64||, where Δfp64 is the same run trained by PyTorch in float64
  end to end (`reference/final_fp64.safetensors`; `fp64_run`: the model in float64 and transformers' explicit
  float32 upcasts in norms, softmaxes and rotary tables made float64 too). A tensor whose gradient is zero or
  near zero in exact arithmetic (AdamW turns its rounding noise into lr-sized updates, so PyTorch fp32 itself
  is far from the exact update) then passes as far as PyTorch fp32 is from float64, and no further. A case
  whose float64 run is not finite says so in `reference.json` (`"fp64": {{"finite": false}}`, no file) and keeps
  the fp32 rule (every final tensor within 1e-4 of PyTorch fp32's). A fixture without the float64 file, or
  with other tensor names in it, fails naming the fixture and the tensor. The test writes each tensor's
  distances to `update_distances.tsv` in its run's output directory.

How much room that leaves: the generator re-runs every case with torch SDPA attention instead of eager
(an equally exact fp32 path with another summation order) and compares with the reference (`gemma2`, which has
no SDPA path because of its soft-cap, runs eager's math in another order instead: q pre-scaled, einsum products):

| case | max loss rel diff | worst final tensors (rel diff) |
|---|---|---|
{chr(10).join(xrows)}

Why `qwen2` uses rope_theta 100: a `k_proj.bias` gradient is zero up to rounding where rope does not
rotate (softmax is invariant to adding the same vector to every key). Theta 100 rotates every pair within 20
positions, so every tensor of this case is well conditioned and passes on its 1e-3 clause. `glm4`, whose 8
pass-through dims of each `k_proj.bias` head never rotate (exactly zero gradient in exact arithmetic, fp32
rounding noise ~1e-9 in practice), trains with the usual AdamW eps 1e-8 and passes on the float64 clause.
"""
    (FIXTURES / "README.md").write_text(text)


def previous_readme_rows():
    """The cross-check rows of the README as it is, by case: kept for the cases this run does not regenerate."""
    path = FIXTURES / "README.md"
    rows = {}
    if path.exists():
        for line in path.read_text().splitlines():
            m = re.match(r"^\| `(\w+)` \| ([0-9.]+e[+-][0-9]+) \| (.*) \|$", line)
            if m:
                rows[m.group(1)] = line
    return rows


def main():
    names = [spec["case"] for spec in CASES]
    parser = argparse.ArgumentParser(description="Write the golden training fixtures under tests/fixtures/.")
    parser.add_argument("cases", nargs="*", metavar="CASE",
                        help=f"cases to (re)generate, default all: {', '.join(names)}")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    args = parser.parse_args()
    if args.list:
        print("\n".join(names))
        return 0
    unknown = sorted(set(args.cases) - set(names))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; cases: {', '.join(names)}")
    selected = [spec for spec in CASES if not args.cases or spec["case"] in args.cases]
    kept_rows = previous_readme_rows()

    FIXTURES.mkdir(parents=True, exist_ok=True)
    results = {}
    for spec in selected:
        print(f"generating {spec['case']} ...", flush=True)
        results[spec["case"]] = make_case(spec)

    print("\nsanity checks:")
    all_ok = True
    for spec in selected:
        all_ok &= check_case(spec, results[spec["case"]])

    print("\ncross-check: the same run with torch SDPA attention instead of eager (fp32):")
    for spec in selected:
        loss_rel, rels = cross_check_sdpa(spec)
        results[spec["case"]]["sdpa"] = (loss_rel, rels)
        worst = ", ".join(f"{k} {r:.1e}" for r, k in rels[:3])
        print(f"  {spec['case']:8s} max loss rel diff {loss_rel:.1e}; worst tensors: {worst}")
    for spec in CASES:  # cases not regenerated: their files and their previous README row
        if spec["case"] not in results:
            ref = json.loads((FIXTURES / spec["case"] / "reference.json").read_text())
            results[spec["case"]] = {"reference": ref, "sdpa_row": kept_rows.get(spec["case"])}
    write_readme(results)
    du = subprocess.run(["du", "-sh", str(FIXTURES)], capture_output=True, text=True).stdout.strip()
    size = sum(f.stat().st_size for f in FIXTURES.rglob("*") if f.is_file())
    print(f"\nfixture size: {du}  ({size} bytes)")
    for spec in CASES:
        for f in sorted((FIXTURES / spec["case"]).rglob("*")):
            limit = 400 * 1024 if f.name == "final_fp64.safetensors" else 200 * 1024  # float64: twice the bytes
            if f.is_file() and f.stat().st_size >= limit:
                print(f"  [FAIL] {f.relative_to(FIXTURES)} is {f.stat().st_size} bytes (>= {limit // 1024} KiB)")
                all_ok = False
    ours = sum(f.stat().st_size for spec in CASES for f in (FIXTURES / spec["case"]).rglob("*") if f.is_file())
    if ours >= 8 * 1024 * 1024:
        print(f"  [FAIL] this script's fixtures are {ours} bytes (>= 8 MiB)")
        all_ok = False
    print("ALL CHECKS PASSED" if all_ok else "SOME CHECKS FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
