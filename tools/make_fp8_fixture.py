#!/usr/bin/env python3
"""Write the FP8 block-quantised checkpoint fixture tests/fixtures/deepseek_v3_fp8 (run by hand, never by CI).

Usage, from the repository root (the Python of tools/make_fixtures.py: torch 2.x with float8_e4m3fn, transformers 5.x):

    python3 tools/make_fp8_fixture.py

A tiny DeepseekV3ForCausalLM (vocab 128, hidden 160, 2 layers: layer 0 dense, layer 1 four experts of 8 under noaux_tc
plus a shared expert; latent attention with q_lora_rank 16, kv_lora_rank 16, q/k 8 + 8, values of 12) saved as the hub
publishes DeepSeek-V3: config.json with quantization_config {quant_method fp8, fmt e4m3, activation_scheme dynamic,
weight_block_size [128, 128]}, every 2-D linear weight of the layers F8_E4M3 with `<name>_scale_inv` (fp32, one per
128×128 block: amax / 448, as DeepSeek's quantiser), the embedding, lm_head, norms and router in bf16,
e_score_correction_bias in fp32, and one tensor of an MTP layer (num_nextn_predict_layers 1: layer 2's
kv_a_proj_with_mqa, F8 with its scales) that training carries and export dequantises. hidden 160 makes every block that spans it partial (128 + 32).

Written:
  model/                       the FP8 checkpoint
  reference/dequantised.safetensors
                               every F8 tensor dequantised by torch (fp32(code) · scale_inv[i // 128, j // 128],
                               checked equal to transformers' _dequantize_fp8_weight): what the loader must give
  reference/e4m3fn.safetensors codes [256] (F8_E4M3, the codes 0..255) and values [256] (F32, torch's decoding)
  reference.json               losses, grad norms and learning rates of 3 AdamW steps by PyTorch in fp32 from the
                               dequantised weights (the other tensors widened from bf16)
  data/, train.yaml            as the other fixtures
"""

import json
import shutil
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402  (sets torch threads and determinism)
import make_moe_fixtures as moe  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM  # noqa: E402
from transformers.integrations.finegrained_fp8 import _dequantize_fp8_weight  # noqa: E402

CASE = "deepseek_v3_fp8"
BLOCK = 128
HIDDEN = 160
MTP_TENSOR = "model.layers.2.self_attn.kv_a_proj_with_mqa.weight"  # one tensor of the MTP layer (num_hidden_layers)
QUANTIZATION = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [BLOCK, BLOCK]}

SPEC = dict(
    case=CASE,
    seed=47,
    model_cls=DeepseekV3ForCausalLM,
    config=DeepseekV3Config(
        **dict(mf.COMMON_MODEL, hidden_size=HIDDEN, intermediate_size=16, num_hidden_layers=2),
        num_attention_heads=2,
        num_key_value_heads=2,
        q_lora_rank=16,
        kv_lora_rank=16,
        qk_nope_head_dim=8,
        qk_rope_head_dim=8,
        v_head_dim=12,
        tie_word_embeddings=False,
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=8,
        n_group=2,
        topk_group=1,
        routed_scaling_factor=2.5,
        n_shared_experts=1,
        first_k_dense_replace=1,
        norm_topk_prob=True,
        rope_interleave=True,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 100.0},
    ),
    score_bias=0.3,
    training=dict(num_steps=3, lr_scheduler="cosine", warmup_steps=1, min_lr_ratio=0.1, max_grad_norm=1.0),
)


def quantised(name, p):
    """DeepSeek's FP8 checkpoints quantise the layers' 2-D linear weights; not the router (mlp.gate)."""
    return p.ndim == 2 and name.startswith("model.layers.") and not name.endswith("mlp.gate.weight")


def quantise(w):
    """Per 128×128 block: scale = amax / 448, codes = (w / scale) in e4m3fn (DeepSeek's weight quantiser)."""
    rows, cols = w.shape
    rb, cb = -(-rows // BLOCK), -(-cols // BLOCK)
    scale = torch.empty(rb, cb, dtype=torch.float32)
    codes = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    for i in range(rb):
        for j in range(cb):
            block = w[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK]
            s = block.abs().max() / 448.0
            scale[i, j] = s
            codes[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK] = (block / s).to(torch.float8_e4m3fn)
    return codes, scale


def dequantise(codes, scale):
    """fp32(code[i, j]) · scale[i // 128, j // 128] in fp32, partial edge blocks included; equal to transformers'."""
    rows, cols = codes.shape
    full = scale.repeat_interleave(BLOCK, 0)[:rows].repeat_interleave(BLOCK, 1)[:, :cols]
    value = codes.to(torch.float32) * full
    theirs = _dequantize_fp8_weight(codes.clone(), scale.clone(), [BLOCK, BLOCK], torch.float32)
    if not torch.equal(value.view(torch.int32), theirs.view(torch.int32)):
        raise RuntimeError("the dequantisation differs from transformers' _dequantize_fp8_weight")
    return value


def main():
    out = mf.FIXTURES / CASE
    if out.exists():
        shutil.rmtree(out)
    for d in ("model", "data", "reference"):
        (out / d).mkdir(parents=True)
    t = dict(mf.COMMON_TRAINING, **SPEC["training"])
    examples = mf.make_examples(SPEC["seed"], t["batch_size"] * t["num_steps"])
    model = moe.build_model(SPEC)
    model.config.num_nextn_predict_layers = 1
    model.save_pretrained(out / "model", safe_serialization=True)  # config.json and the checkpoint's tensor names
    (out / "model" / "generation_config.json").unlink(missing_ok=True)
    plain_config = json.loads((out / "model" / "config.json").read_text())
    gen = torch.Generator().manual_seed(7)
    stored, dequantised, initial = {}, {}, {}
    weights = load_file(out / "model" / "model.safetensors")
    weights[MTP_TENSOR] = torch.randn(16 + 8, HIDDEN, generator=gen) * 0.05  # kv_lora_rank + qk_rope_head_dim
    for name, p in weights.items():
        p = p.to(torch.float32)
        if quantised(name, p):
            tiny = torch.rand(p.shape, generator=gen) < 0.02  # 2 % of the weights far below their block's amax:
            p = torch.where(tiny, p * 1e-4, p)                 # subnormal and zero codes
            codes, scale = quantise(p)
            stored[name], stored[name + "_scale_inv"] = codes.contiguous(), scale
            dequantised[name] = initial[name] = dequantise(codes, scale)
        elif name.endswith("e_score_correction_bias"):
            stored[name] = initial[name] = p.contiguous()
        else:
            stored[name] = p.to(torch.bfloat16).contiguous()
            initial[name] = stored[name].to(torch.float32)
    small = sum(int(torch.count_nonzero((stored[n].view(torch.uint8) & 0x78) == 0)) for n in dequantised)
    print(f"  {len(dequantised)} F8 tensors, {small} subnormal or zero codes")
    mf.write_json(out / "model" / "config.json", dict(plain_config, quantization_config=QUANTIZATION))
    save_file(stored, str(out / "model" / "model.safetensors"), metadata={"format": "pt"})
    save_file(dequantised, str(out / "reference" / "dequantised.safetensors"), metadata={"format": "pt"})
    codes = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn)
    save_file({"codes": codes.contiguous(), "values": codes.to(torch.float32)},
              str(out / "reference" / "e4m3fn.safetensors"), metadata={"format": "pt"})

    # PyTorch's run starts from the dequantised weights, loaded by transformers from an unquantised directory.
    plain = out / "reference" / "plain"
    plain.mkdir()
    mf.write_json(plain / "config.json", plain_config)
    save_file({k: v for k, v in initial.items() if k != MTP_TENSOR}, str(plain / "model.safetensors"),
              metadata={"format": "pt"})
    model = DeepseekV3ForCausalLM.from_pretrained(plain, dtype=torch.float32, attn_implementation="eager")
    shutil.rmtree(plain)
    model.save_pretrained(plain, safe_serialization=True)
    loaded = load_file(plain / "model.safetensors")
    shutil.rmtree(plain)
    if loaded.keys() != initial.keys() - {MTP_TENSOR} or any(not torch.equal(v, initial[k]) for k, v in loaded.items()):
        raise RuntimeError("transformers did not load exactly the dequantised weights")
    mf.write_json(out / "data" / "dataset_info.json", {"fixture": {"file_name": "train.jsonl", "formatting": "tokenized"}})
    with open(out / "data" / "train.jsonl", "w") as f:
        for ex in examples:
            f.write(json.dumps(ex, separators=(",", ":")) + "\n")
    losses, _, grad_norms, lrs = moe.train(model, examples, t, False)
    reference = {
        "case": CASE,
        "architecture": "DeepseekV3ForCausalLM",
        "training": {k: t[k] for k in ("batch_size", "num_steps", "learning_rate", "lr_scheduler", "warmup_steps",
                                       "min_lr_ratio", "weight_decay", "max_grad_norm", "beta1", "beta2", "eps")},
        "losses": losses,
        "aux_losses": [],
        "aux_coef": 0.0,
        "grad_norms": grad_norms,
        "lrs": lrs,
    }
    mf.write_json(out / "reference.json", reference)
    mf.write_train_yaml(out / "train.yaml", SPEC, t)
    (out / "train.yaml").write_text((out / "train.yaml").read_text().replace("tools/make_fixtures.py",
                                                                             "tools/make_fp8_fixture.py"))
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"  {CASE}: losses {losses}, grad norms {grad_norms}, {total} B in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
