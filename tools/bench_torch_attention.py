#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention (cuDNN and flash backends) at the shapes of the tests_gpu attention probe.

Invariant: the same shapes and FLOP accounting as tests_gpu "[.attention_bench]": causal, bf16, head_dim 128, GQA
16:2, (batch, seq) = (4, 8192) and (1, 32768); q/k/v token-major ([batch, seq, heads, head_dim] viewed as
[batch, heads, seq, head_dim], as MegaTrain stores them); forward FLOPs 4·b·h·s²·d / 2, backward 2.5 × forward;
median of 5 timed runs after 2 warm-ups (CUDA events), forward with gradients enabled (it saves the softmax stats),
backward timed alone from a retained graph. GQA goes through enable_gqa where the backend takes it, else k/v are
repeated to 16 heads first (the line says so). --deterministic runs under torch.use_deterministic_algorithms(True)
(warn_only=False), with the memory-efficient backend too: a backend whose backward is not deterministic refuses, and
the line says so. Every line says whether the backward gave the same bits twice. Run on the GPU machine: python3 tools/bench_torch_attention.py [--deterministic]
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_tflops(fn, flops, steps, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return flops / statistics.median(times) / 1e12


def run(backend, batch, seq, heads, kv_heads, head_dim, steps, warmup):
    torch.manual_seed(0)
    dev = torch.device("cuda")

    def tokens(h):
        return torch.randn(batch, seq, h, head_dim, device=dev, dtype=torch.bfloat16).transpose(1, 2)

    q, k, v = tokens(heads), tokens(kv_heads), tokens(kv_heads)
    fwd_flops = 4.0 * batch * heads * seq * seq * head_dim / 2
    result = {"backend": backend.name, "batch": batch, "seq": seq, "heads": heads, "kv_heads": kv_heads,
              "head_dim": head_dim}
    for gqa in ("enable_gqa", "repeated k/v"):
        try:
            if gqa == "enable_gqa":
                qq, kk, vv, extra = q, k, v, {"enable_gqa": True}
            else:
                rep = heads // kv_heads
                qq, kk, vv, extra = q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), {}
            qq, kk, vv = (t.detach().requires_grad_(True) for t in (qq, kk, vv))
            with sdpa_kernel([backend]):
                def forward():
                    return F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, **extra)

                fwd = median_tflops(forward, fwd_flops, steps, warmup)
                out = forward()
                grad = torch.randn_like(out)

                def backward():
                    torch.autograd.grad(out, (qq, kk, vv), grad, retain_graph=True)

                bwd = median_tflops(backward, 2.5 * fwd_flops, steps, warmup)
                first = torch.autograd.grad(out, (qq, kk, vv), grad, retain_graph=True)
                again = torch.autograd.grad(out, (qq, kk, vv), grad, retain_graph=True)
                repeat = all(torch.equal(a, b) for a, b in zip(first, again))
            result.update({"gqa": gqa, "forward_tflops": round(fwd, 1), "backward_tflops": round(bwd, 1),
                           "backward_bitwise_on_repeat": repeat})
            return result
        except RuntimeError as e:  # the backend refuses this form; try the next
            result["refused_" + gqa.replace(" ", "_").replace("/", "")] = str(e).splitlines()[0][:200]
            torch.cuda.synchronize()
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    ap.add_argument("--deterministic", action="store_true",
                    help="torch.use_deterministic_algorithms(True): only backends with a deterministic backward run")
    args = ap.parse_args()
    backends = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]
    if args.deterministic:
        torch.use_deterministic_algorithms(True)
        backends.append(SDPBackend.EFFICIENT_ATTENTION)
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}"
          f"{', deterministic algorithms' if args.deterministic else ''}")
    for batch, seq in ((4, 8192), (1, 32768)):
        for backend in backends:
            r = run(backend, batch, seq, 16, 2, 128, args.steps, args.warmup)
            if args.json:
                print(json.dumps(r))
            elif "forward_tflops" in r:
                print(f"batch {batch} seq {seq} {backend.name} ({r['gqa']}): forward {r['forward_tflops']} "
                      f"backward {r['backward_tflops']} TFLOP/s, backward bit for bit on a repeat: "
                      f"{'yes' if r['backward_bitwise_on_repeat'] else 'NO'}")
            else:
                print(f"batch {batch} seq {seq} {backend.name}: refused: {r}")


if __name__ == "__main__":
    main()
