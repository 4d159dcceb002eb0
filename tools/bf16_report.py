#!/usr/bin/env python3
"""Per-tensor distance from float64 of a bf16 run: MegaTrain's next to PyTorch bf16 autocast's (run by hand).

Usage, from the repository root, after the bf16 parity tests wrote their runs (tests_integration "[bf16]"), or
with --ours pointing at any bf16 run's last checkpoint:

    python3 tools/bf16_report.py qwen3_5 llama        # ours: build/test-scratch/parity-bf16-<case>/checkpoints/
    python3 tools/bf16_report.py qwen3_5 --ours RUN/checkpoints/step-000003.h5

Ours is the run's fp32 master weights, exported from its last checkpoint by `megatrain export --dtype float32`
(a bf16 run's final/ holds them rounded to bf16, whose spacing near 1 (2^-7) exceeds a norm weight's whole update).

For each case it rebuilds the generator's initial model and batches (tools/make_fixtures.py,
tools/make_hybrid_fixtures.py, tools/make_moe_fixtures.py), trains them again in PyTorch under
torch.autocast("cpu", dtype=torch.bfloat16) (fp32 master weights, bf16 matmuls), and prints per tensor the update
distances ‖Δ − Δfp64‖ / ‖Δfp64‖ of ours (model.dtype bfloat16) and of PyTorch's bf16 autocast run, with Δfp64 from
reference/final_fp64.safetensors, and their ratio. Tensors are sorted by the ratio, worst first.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_dense_family_fixtures as md  # noqa: E402
import make_fixtures as mf  # noqa: E402
import make_hybrid_fixtures as mh  # noqa: E402
import make_mla_fixtures as ml  # noqa: E402
import make_moe_fixtures as mm  # noqa: E402
from safetensors.torch import load_file  # noqa: E402


def checkpoint_tensors(model):
    """The model's weights as save_pretrained names them (MoE: one tensor per expert), as the fixtures store them."""
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        return load_file(Path(tmp) / "model.safetensors")


def autocast_final(case):
    """The case's PyTorch run under bf16 autocast; its final weights by the fixture's names (fp32 masters)."""
    for spec in mf.CASES:
        if spec["case"] == case:
            if spec.get("export"):
                raise SystemExit(f"{case}: a trust_remote_code family (its names differ from transformers'): not covered")
            t = dict(mf.COMMON_TRAINING, **spec["training"])
            model = mf.build_model(spec)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                mf.train(model, mf.make_examples(spec["seed"], t["batch_size"] * t["num_steps"]), t)
            return checkpoint_tensors(model)
    for spec in mh.CASES:
        if spec["case"] == case:
            t = dict(mh.TRAINING)
            n = t["batch_size"] * t["num_steps"]
            if spec["packing"]:
                raise SystemExit(f"{case}: packed cases are not covered")
            examples = mh.make_examples(spec["seed"], n, spec["lengths"])
            model = mh.build_model(spec)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                mh.train(model, mh.step_batches(spec, examples, t), t)
            return checkpoint_tensors(model)
    for spec in mm.CASES:
        if spec["case"] == case:
            if spec["model_cls"] is mm.Llama4ForCausalLM or spec.get("mxfp4"):
                raise SystemExit(f"{case}: Llama 4 and MXFP4 cases are not covered")
            t = dict(mf.COMMON_TRAINING, **spec["training"])
            model = mm.build_model(spec)
            aux_on = bool(getattr(spec["config"], "output_router_logits", False)) and mm.has_router_loss(model)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                mm.train(model, mf.make_examples(spec["seed"], t["batch_size"] * t["num_steps"]), t, aux_on)
            return checkpoint_tensors(model)
    for spec in md.CASES:
        if spec["case"] == case:
            t = dict(md.TRAINING)
            examples = mh.make_examples(spec["seed"], t["batch_size"] * t["num_steps"], md.LENGTHS)
            model = md.build_model(spec)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                mh.train(model, mh.step_batches(dict(spec, packing=False), examples, t), t)
            return checkpoint_tensors(model)
    for spec in ml.CASES:
        if spec["case"] == case:
            t = dict(mf.COMMON_TRAINING, **spec["training"])
            n = t["batch_size"] * t["num_steps"]
            examples = ml.long_examples(spec["seed"], n) if spec.get("long") else mf.make_examples(spec["seed"], n)
            model = mm.build_model(spec)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                mm.train(model, examples, t, False)
            return checkpoint_tensors(model)
    raise SystemExit(f"unknown case {case}")


def distance(final, initial, fp64):
    d, d64 = final.double() - initial.double(), fp64.double() - initial.double()
    return ((d - d64).norm() / d64.norm().clamp_min(1e-300)).item()


def master_weights(megatrain, checkpoint):
    """The checkpoint's fp32 master weights by HF name (megatrain export --dtype float32)."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([str(megatrain), "export", "--checkpoint", str(checkpoint), "--out", tmp + "/hf", "--dtype",
                        "float32"], check=True, capture_output=True)
        return load_file(Path(tmp) / "hf" / "model.safetensors")


def report(case, ours):
    fixture = mf.FIXTURES / case
    initial = load_file(fixture / "model" / "model.safetensors")
    fp64 = load_file(fixture / "reference" / "final_fp64.safetensors")
    theirs = autocast_final(case)
    rows = []
    for name in fp64:
        if name not in initial or name not in theirs:  # MoE experts stored per expert, tied duplicates
            continue
        a, b = distance(ours[name], initial[name], fp64[name]), distance(theirs[name], initial[name], fp64[name])
        # equal distances (both 0 for a tensor no step changes, as the noaux_tc router's correction bias): ratio 1
        rows.append((1.0 if a == b else a / b if b > 0 else float("inf"), name, a, b))
    print(f"\n{case}: update distance from float64, ‖Δ − Δfp64‖ / ‖Δfp64‖ ({len(rows)} tensors)")
    print(f"  {'tensor':55s} {'MegaTrain bf16':>14s} {'PyTorch bf16':>14s} {'ratio':>7s}")
    for ratio, name, a, b in sorted(rows, reverse=True):
        print(f"  {name:55s} {a:14.3e} {b:14.3e} {ratio:7.2f}")
    ratios = sorted(r[0] for r in rows)
    print(f"  median ratio {ratios[len(ratios) // 2]:.2f}, worst {ratios[-1]:.2f}")


def main():
    parser = argparse.ArgumentParser(description="bf16 update distances from float64: MegaTrain and PyTorch autocast.")
    parser.add_argument("cases", nargs="+", metavar="CASE")
    parser.add_argument("--ours", type=Path, help="our bf16 run's last checkpoint (.h5; one case only)")
    parser.add_argument("--build", type=Path, default=mf.ROOT / "build",
                        help="the build dir: its megatrain, and the bf16 tests' runs under test-scratch/")
    args = parser.parse_args()
    if args.ours and len(args.cases) != 1:
        parser.error("--ours takes one case")
    for case in args.cases:
        checkpoints = sorted((args.build / "test-scratch" / f"parity-bf16-{case}" / "checkpoints").glob("step-*.h5"))
        checkpoint = args.ours or (checkpoints[-1] if checkpoints else None)
        if checkpoint is None or not checkpoint.exists():
            raise SystemExit(f"{case}: no bf16 run's checkpoint under {args.build / 'test-scratch'}: run "
                             "tests_integration \"[bf16]\" first, or pass --ours")
        report(case, master_weights(args.build / "megatrain", checkpoint))
    return 0


if __name__ == "__main__":
    sys.exit(main())
