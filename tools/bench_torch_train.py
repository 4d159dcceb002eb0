#!/usr/bin/env python3
"""PyTorch reference for `megatrain bench`: the same model shape, batch and sequence length trained with
transformers (SDPA attention, gradient checkpointing), fp32 master weights under bf16 autocast, and
torch.optim.AdamW(fused=True), with all state on the GPU. Run by hand on a GPU machine, never in CI:

    python3 tools/bench_torch_train.py --model configs/models/qwen2.5-3b.json --batch 8 --seq 1024 --steps 5

Prints one JSON line: median step time, tokens/s, TFLOP/s (6 x parameters x tokens / step time, the same
accounting as megatrain bench) and peak GPU memory.
"""
import argparse
import json
import statistics
import time

import torch
import transformers


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--layers", type=int, default=0)
    a = p.parse_args()

    cfg = json.load(open(a.model))
    if a.layers:
        cfg["num_hidden_layers"] = a.layers
    config = transformers.CONFIG_MAPPING[cfg.pop("model_type")](**cfg)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    model.gradient_checkpointing_enable()
    model.config.use_cache = False
    model.train()
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)

    times = []
    for step in range(a.warmup + a.steps):
        ids = torch.randint(0, config.vocab_size, (a.batch, a.seq), device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    tokens = a.batch * a.seq
    print(json.dumps({"impl": "pytorch", "model": a.model, "parameters": params, "batch": a.batch, "seq": a.seq,
                      "median_step_s": t, "median_tokens_per_s": tokens / t,
                      "median_tflops": 6 * params * tokens / t / 1e12,
                      "peak_gpu_memory_gib": torch.cuda.max_memory_allocated() / 2**30}))


if __name__ == "__main__":
    main()
