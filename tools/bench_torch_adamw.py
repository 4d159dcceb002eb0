#!/usr/bin/env python3
"""Times torch.optim.AdamW(fused=True) on CPU fp32 tensors: the baseline of `megatrain bench-optim`.

Invariant: the same work as bench-optim's AdamW pass for the same P (P parameters in chunks of at most
--chunk elements, weight decay on, gradients already present); bytes moved per parameter: read g, p, m, v,
write p, m, v = 28 B (torch keeps no bf16 copy). Also times a plain copy of P fp32 values (8 B per
parameter) as the host's bandwidth ceiling, and the whole optimizer step a torch trainer with MegaTrain's
semantics needs (clip_grad_norm_ + AdamW + the bf16 copy that would stream to the GPU), to compare with
bench-optim's "whole step". Run by hand: python3 tools/bench_torch_adamw.py --params 2.5e8
"""
import argparse
import json
import statistics
import time

import torch


def median_seconds(fn, steps, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=float, required=True, help="number of parameters P (1e9 notation accepted)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=1 << 26, help="elements per tensor (bench-optim's region size)")
    ap.add_argument("--impl", choices=["fused", "foreach"], default="fused")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args()
    P = int(args.params)

    torch.manual_seed(0)
    sizes = [min(args.chunk, P - o) for o in range(0, P, args.chunk)]
    params = [torch.nn.Parameter(torch.randn(n) * 0.02) for n in sizes]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, fused=args.impl == "fused",
                            foreach=args.impl == "foreach" or None)
    adamw_s = median_seconds(opt.step, args.steps, args.warmup)

    bf16 = [torch.empty(n, dtype=torch.bfloat16) for n in sizes]

    def whole_step():
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()
        for b, p in zip(bf16, params):
            b.copy_(p.detach())

    step_s = median_seconds(whole_step, args.steps, args.warmup)

    src = torch.randn(P)
    dst = torch.empty_like(src)
    copy_s = median_seconds(lambda: dst.copy_(src), args.steps, args.warmup)

    result = {
        "impl": f"torch.optim.AdamW({args.impl}=True)",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "params": P,
        "tensors": len(sizes),
        "adamw_s": adamw_s,
        "params_per_s": P / adamw_s,
        "adamw_gb_per_s": 28 * P / adamw_s / 1e9,
        "step_s": step_s,
        "step_params_per_s": P / step_s,
        "copy_gb_per_s": 8 * P / copy_s / 1e9,
    }
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>14}: {v:.4g}" if isinstance(v, float) else f"{k:>14}: {v}")


if __name__ == "__main__":
    main()
