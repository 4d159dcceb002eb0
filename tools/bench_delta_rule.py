#!/usr/bin/env python3
"""Time transformers' PyTorch chunked gated delta rule (torch_chunk_gated_delta_rule, the fallback used where
flash-linear-attention is not installed) and flash-linear-attention's Triton kernels (fla.ops.gated_delta_rule.
chunk_gated_delta_rule, where the `fla` package imports) forward + backward: the baselines MegaTrain's delta-rule
kernels compare with.

Usage (python3 with torch and transformers >= 5 with Qwen3.5; CUDA for the real shapes):

    python3 tools/bench_delta_rule.py                 # Qwen3.5-27B's linear-attention shape, bf16, CUDA:
                                                      #   batch 8 x 4096 and 1 x 32768
    python3 tools/bench_delta_rule.py --tiny          # a tiny shape on the CPU in fp32 (checks the script runs)
    python3 tools/bench_delta_rule.py --shapes 2x8192 --heads 16,48 --head-dim 128 --iters 5
    python3 tools/bench_delta_rule.py --impl fla       # only flash-linear-attention (pip install fla-core einops;
                                                      #   on a machine without an index: unzip their wheels onto
                                                      #   PYTHONPATH)

The inputs are those the Gated DeltaNet layer hands the rule: q, k [B, T, k_heads, d_k] (L2-normalised in the
kernel: use_qk_l2norm_in_kernel), v [B, T, v_heads, d_v], g = -softplus(.) <= 0 and beta = sigmoid(.)
[B, T, v_heads], every one requiring grad; the backward is of sum(out · dout) for a fixed random dout. The torch
function is called through its __wrapped__ (the torch path) even where a faster implementation is installed; fla's
takes the same arguments (its grouped value heads: v heads a multiple of k heads).

FLOP accounting (stated per v head and per 64-token chunk C, d_k = d_v = d; the matrix products the chunked
algorithm performs, 2 FLOPs a multiply-add, triangular solves counted at half a dense product):
  intra-chunk    k_beta k^T and q k^T                      2 x 2 C^2 d
  UT transform   the two unit-lower-triangular solves       2 x C^2 d
  inter-chunk    k_cumdecay S, q S, attn v_new, k^T v_new   3 x 2 C d^2 + 2 C^2 d
i.e. forward = 8 C^2 d + 6 C d^2 per chunk (for C 64, d 128: 163,840 per token per v head); backward counted as
twice the forward, so forward + backward = 3 x forward. MegaTrain's step FLOPs (src/model/flops.h) count the
recurrence instead, 18 d_k d_v per token per v head (forward + backward); both figures are printed, with the
milliseconds (median over --iters timed runs after --warmup runs, CUDA events on the GPU).
"""

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def chunked_rule():
    """transformers' torch chunked gated delta rule (Qwen3.5's module, else Qwen3-Next's), unwrapped."""
    try:
        from transformers.models.qwen3_5 import modeling_qwen3_5 as m
    except ImportError:
        from transformers.models.qwen3_next import modeling_qwen3_next as m
    fn = m.torch_chunk_gated_delta_rule
    return getattr(fn, "__wrapped__", fn), m.__name__


def fla_rule():
    """flash-linear-attention's Triton chunked gated delta rule, or None where `fla` does not import."""
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except ImportError as e:
        print(f"flash-linear-attention not available ({e}): its rows are skipped", flush=True)
        return None
    import fla
    return chunk_gated_delta_rule, f"fla {getattr(fla, '__version__', '?')}"


def chunked_flops_forward(tokens, v_heads, d_k, d_v, chunk=64):
    """The forward FLOPs of the chunked algorithm over `tokens` tokens (rounded up to whole chunks) of each v head."""
    chunks = -(-tokens // chunk)
    per_chunk = (2 * 2 * chunk * chunk * d_k  # k_beta k^T, q k^T
                 + chunk * chunk * (d_v + d_k)  # the two triangular solves (v_beta, decayed k_beta)
                 + 2 * chunk * d_k * d_v * 3  # k_cumdecay S, q S, k^T v_new
                 + 2 * chunk * chunk * d_v)  # intra-chunk attention x v_new
    return chunks * per_chunk * v_heads


def recurrence_flops(tokens, v_heads, d_k, d_v):
    """src/model/flops.h's Gated DeltaNet term: 18 d_k d_v per token per v head, forward + backward."""
    return 18 * tokens * v_heads * d_k * d_v


def make_inputs(batch, seq, k_heads, v_heads, d_k, d_v, dtype, device, gen):
    def randn(*shape):
        return torch.randn(*shape, generator=gen, device="cpu", dtype=torch.float32).to(device=device, dtype=dtype)

    q = randn(batch, seq, k_heads, d_k)
    k = randn(batch, seq, k_heads, d_k)
    v = randn(batch, seq, v_heads, d_v)
    g = -F.softplus(randn(batch, seq, v_heads).float() + 1.0).to(dtype)
    beta = torch.sigmoid(randn(batch, seq, v_heads).float()).to(dtype)
    dout = randn(batch, seq, v_heads, d_v)
    leaves = [t.requires_grad_() for t in (q, k, v, g, beta)]
    return leaves, dout


def time_ms(fn, warmup, iters, device):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def bench(name, rule, batch, seq, args, dtype, device):
    gen = torch.Generator().manual_seed(0)
    (q, k, v, g, beta), dout = make_inputs(batch, seq, args.k_heads, args.v_heads, args.head_dim, args.head_dim,
                                           dtype, device, gen)
    if name == "torch" and args.v_heads != args.k_heads:  # the torch rule wants one q/k head per v head, as the
        groups = args.v_heads // args.k_heads  # Gated DeltaNet layer repeats them before calling it (not timed)
        q, k = (t.detach().repeat_interleave(groups, dim=2).requires_grad_() for t in (q, k))

    def forward():
        with torch.no_grad():
            rule(q, k, v, g=g, beta=beta, use_qk_l2norm_in_kernel=True)

    def forward_backward():
        out, _ = rule(q, k, v, g=g, beta=beta, use_qk_l2norm_in_kernel=True)
        torch.autograd.backward(out, dout)
        for t in (q, k, v, g, beta):
            t.grad = None

    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    fwd_ms = time_ms(forward, args.warmup, args.iters, device)
    tokens = batch * seq
    fwd = chunked_flops_forward(seq, args.v_heads, args.head_dim, args.head_dim) * batch
    try:
        fb_ms = time_ms(forward_backward, args.warmup, args.iters, device)
    except RuntimeError as e:  # e.g. fla refusing its backward on a Triton with a known Hopper bug
        print(f"{batch} x {seq:>6} {str(dtype).removeprefix('torch.'):>8} {name:>5}: forward {fwd_ms:9.2f} ms "
              f"({fwd / fwd_ms / 1e9:8.3f} TFLOP/s chunked); backward refused: {str(e).splitlines()[0]}", flush=True)
        return
    rec = recurrence_flops(tokens, args.v_heads, args.head_dim, args.head_dim)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else float("nan")
    print(f"{batch} x {seq:>6} {str(dtype).removeprefix('torch.'):>8} {name:>5}: forward {fwd_ms:9.2f} ms "
          f"({fwd / fwd_ms / 1e9:8.3f} TFLOP/s chunked)  forward+backward {fb_ms:9.2f} ms "
          f"({3 * fwd / fb_ms / 1e9:8.3f} TFLOP/s chunked, {rec / fb_ms / 1e9:8.3f} TFLOP/s recurrence accounting)  "
          f"{tokens / fb_ms:9.1f} ktoken/s  peak {peak:.1f} GiB", flush=True)


def parse_shape(text):
    batch, seq = text.lower().split("x")
    return int(batch), int(seq)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="tiny shape on the CPU in fp32 (a smoke run)")
    parser.add_argument("--shapes", default="8x4096,1x32768", help="comma-separated BATCHxSEQ (default 8x4096,1x32768)")
    parser.add_argument("--heads", default="16,48", help="K_HEADS,V_HEADS (default Qwen3.5-27B's 16,48)")
    parser.add_argument("--head-dim", type=int, default=128, help="d_k = d_v (default 128)")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default=None, help="default bf16 (fp32 --tiny)")
    parser.add_argument("--device", default=None, help="default cuda (cpu with --tiny)")
    parser.add_argument("--impl", default="torch,fla", help="comma-separated torch,fla (default both; fla where it "
                        "imports and the device is CUDA)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args()
    if args.tiny:
        args.shapes, args.heads, args.head_dim = "2x200,1x130", "2,4", 16
        args.warmup, args.iters = 1, 2
    args.k_heads, args.v_heads = (int(x) for x in args.heads.split(","))
    if args.v_heads % args.k_heads:
        parser.error(f"--heads: v heads ({args.v_heads}) must be a multiple of k heads ({args.k_heads})")
    dtype = getattr(torch, args.dtype or ("float32" if args.tiny else "bfloat16"))
    device = torch.device(args.device or ("cpu" if args.tiny else "cuda"))
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_delta_rule: CUDA is not available (use --tiny or --device cpu)")
    impls = args.impl.split(",")
    if any(i not in ("torch", "fla") for i in impls):
        parser.error(f"--impl: torch or fla, not {args.impl!r}")
    rules = []
    if "torch" in impls:
        rule, module = chunked_rule()
        rules.append(("torch", rule, f"{module}.torch_chunk_gated_delta_rule (torch path)"))
    if "fla" in impls and device.type == "cuda":
        found = fla_rule()
        if found:
            rules.append(("fla", found[0], f"{found[1]} chunk_gated_delta_rule (Triton)"))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"torch {torch.__version__}, {name}; k heads {args.k_heads}, v heads {args.v_heads}, head dim "
          f"{args.head_dim}, chunk 64; " + "; ".join(f"{n}: {what}" for n, _, what in rules))
    for shape in args.shapes.split(","):
        batch, seq = parse_shape(shape)
        for n, rule, _ in rules:
            bench(n, rule, batch, seq, args, dtype, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
