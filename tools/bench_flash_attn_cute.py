#!/usr/bin/env python3
"""FlashAttention's CuTe-DSL kernels (the flash-attn-4 wheel: SM90 forward and backward on Hopper) at the shapes of the
tests_gpu attention probe, deterministic and not.

Invariant: the shapes and FLOP accounting of tests_gpu "[.attention_bench]" and tools/bench_torch_attention.py:
causal, bf16, head_dim 128, GQA 16:2 (the kernel's own GQA), (batch, seq) = (4, 8192) and (1, 32768), q/k/v
token-major [batch, seq, heads, head_dim]; forward FLOPs 4·b·h·s²·d / 2, backward 2.5 × forward; median of 5 timed runs
after 2 warm-ups (CUDA events; the first warm-up compiles the kernel), the backward timed alone from a retained graph.
Each line says whether the backward gave dq, dk and dv bit for bit on three repeats. Its wheels do not install on the
GPU machine: unpack them onto PYTHONPATH (tools/gpu_session.sh does, from pywheels/). Run there:
python3 tools/bench_flash_attn_cute.py
"""
import argparse
import sys

import torch

from bench_torch_attention import median_tflops  # the same timing (tools/ is this script's directory)


def run(attn, batch, seq, heads, kv_heads, head_dim, deterministic, steps, warmup):
    torch.manual_seed(0)

    def tokens(h):
        return torch.randn(batch, seq, h, head_dim, device="cuda", dtype=torch.bfloat16).requires_grad_(True)

    q, k, v = tokens(heads), tokens(kv_heads), tokens(kv_heads)
    fwd_flops = 4.0 * batch * heads * seq * seq * head_dim / 2

    def forward():
        out = attn(q, k, v, causal=True, deterministic=deterministic)
        return out[0] if isinstance(out, tuple) else out

    fwd = median_tflops(forward, fwd_flops, steps, warmup)
    out = forward()
    grad = torch.randn_like(out)

    def backward():
        return torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)

    bwd = median_tflops(backward, 2.5 * fwd_flops, steps, warmup)
    first = backward()
    same = all(all(torch.equal(a, b) for a, b in zip(first, backward())) for _ in range(3))
    return fwd, bwd, same


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    try:
        import flash_attn.cute as fa_cute
        from flash_attn.cute.interface import flash_attn_func
    except Exception as e:  # a missing wheel, or one this torch cannot serve: one line, and a failed exit
        print(f"flash_attn.cute not available: {type(e).__name__}: {e}")
        sys.exit(1)
    print(f"flash_attn.cute {getattr(fa_cute, '__version__', '?')}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}")
    for batch, seq in ((4, 8192), (1, 32768)):
        for deterministic in (False, True):
            label = "deterministic" if deterministic else "non-deterministic"
            try:
                fwd, bwd, same = run(flash_attn_func, batch, seq, 16, 2, 128, deterministic, args.steps, args.warmup)
                print(f"batch {batch} seq {seq} flash_attn.cute {label}: forward {fwd:.1f} backward {bwd:.1f} "
                      f"TFLOP/s, backward bit for bit on three repeats: {'yes' if same else 'NO'}", flush=True)
            except Exception as e:  # a configuration this release refuses: say so and go on
                print(f"batch {batch} seq {seq} flash_attn.cute {label}: failed: {str(e).splitlines()[0][:300]}",
                      flush=True)
                torch.cuda.synchronize()


if __name__ == "__main__":
    main()
