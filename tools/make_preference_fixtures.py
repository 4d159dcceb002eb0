#!/usr/bin/env python3
"""Write the preference-loss fixtures under tests/fixtures/preference_loss/ (run by hand, never by CI).

Usage, from the repository root (Python 3 with torch 2.x; CPU only):

    python3 tools/make_preference_fixtures.py

tests/fixtures/preference_loss/cases.json holds, per case (each pref_loss with its options: pref_beta, pref_ftx,
dpo_label_smoothing, simpo_gamma), a few pairs of per-sequence log-probabilities (each response's SUMMED
log-probability and its response token count, for the policy and, where the loss uses one, the reference) and what
LLaMA-Factory's CustomDPOTrainer computes from them: the batch loss (the mean over pairs), its gradient with respect
to every summed log-probability (PyTorch autograd, float64), and the logged metrics (rewards/chosen,
rewards/rejected, rewards/accuracies, rewards/margins, logps/chosen, logps/rejected, sft_loss, odds_ratio_loss).

The loss formulas below follow LLaMA-Factory 0.9's train/dpo/trainer.py (concatenated_forward: ipo, orpo and simpo
average each sequence's log-probability over its response tokens, the reference's too; odds_ratio_loss, simpo_loss,
pref_ftx's "losses += ftx_gamma * sft_loss" with sft_loss = -chosen_logps_avg) and TRL's dpo_loss for sigmoid,
hinge and ipo. The sigmoid loss is also checked against TRL's own expression as trl (pip) writes it in
DPOTrainer._compute_loss: -logsigmoid(beta * delta_score) with delta_score the difference of the policy/reference
log-ratios (label smoothing 0).
"""

import json
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "preference_loss"


def preference_loss(kind, beta, ftx, label_smoothing, gamma, chosen, rejected, chosen_tokens, rejected_tokens,
                    ref_chosen, ref_rejected):
    """LLaMA-Factory's per-pair losses, rewards and logged logps from summed log-probabilities (float64 tensors)."""
    average = kind in ("ipo", "orpo", "simpo")
    c = chosen / chosen_tokens if average else chosen
    r = rejected / rejected_tokens if average else rejected
    metrics = {}
    if kind in ("orpo", "simpo"):
        if kind == "orpo":
            log_odds = (c - r) - (torch.log1p(-torch.exp(c)) - torch.log1p(-torch.exp(r)))
            odds_ratio = -F.logsigmoid(log_odds)
            losses = -c + beta * odds_ratio
            metrics["odds_ratio_loss"] = odds_ratio.mean().item()
        else:
            logits = (c - r) - gamma / beta
            losses = -F.logsigmoid(beta * logits)
        chosen_rewards, rejected_rewards = beta * c.detach(), beta * r.detach()
    else:
        c0 = ref_chosen / chosen_tokens if average else ref_chosen
        r0 = ref_rejected / rejected_tokens if average else ref_rejected
        logits = (c - r) - (c0 - r0)
        if kind == "sigmoid":
            losses = (-F.logsigmoid(beta * logits) * (1 - label_smoothing)
                      - F.logsigmoid(-beta * logits) * label_smoothing)
        elif kind == "hinge":
            losses = torch.relu(1 - beta * logits)
        else:
            losses = (logits - 1 / (2 * beta)) ** 2
        chosen_rewards = beta * (c - c0).detach()
        rejected_rewards = beta * (r - r0).detach()
    sft_loss = -(chosen / chosen_tokens)
    if ftx > 1e-6:
        losses = losses + ftx * sft_loss
    metrics.update({
        "rewards/chosen": chosen_rewards.mean().item(),
        "rewards/rejected": rejected_rewards.mean().item(),
        "rewards/accuracies": (chosen_rewards > rejected_rewards).double().mean().item(),
        "rewards/margins": (chosen_rewards - rejected_rewards).mean().item(),
        "logps/chosen": c.detach().mean().item(),
        "logps/rejected": r.detach().mean().item(),
        "sft_loss": sft_loss.detach().mean().item(),
    })
    return losses, metrics


def trl_sigmoid(beta, chosen, rejected, ref_chosen, ref_rejected):
    """TRL DPOTrainer._compute_loss, loss_type sigmoid, f_divergence reverse_kl: per-sequence losses."""
    chosen_logratios = chosen - ref_chosen
    rejected_logratios = rejected - ref_rejected
    delta_score = chosen_logratios - rejected_logratios
    return -F.logsigmoid(beta * delta_score)


CASES = [
    # name, pref_loss, beta, ftx, label_smoothing, simpo_gamma
    ("sigmoid", "sigmoid", 0.1, 0.0, 0.0, 0.5),
    ("sigmoid_beta_0_5_smoothing_0_2", "sigmoid", 0.5, 0.0, 0.2, 0.5),
    ("sigmoid_ftx_1", "sigmoid", 0.1, 1.0, 0.0, 0.5),
    ("hinge", "hinge", 0.3, 0.0, 0.0, 0.5),
    ("ipo", "ipo", 0.1, 0.0, 0.0, 0.5),
    ("ipo_ftx_0_5", "ipo", 0.2, 0.5, 0.0, 0.5),
    ("orpo", "orpo", 0.1, 0.0, 0.0, 0.5),
    ("simpo", "simpo", 2.0, 0.0, 0.0, 0.5),
    ("simpo_gamma_1_ftx_0_1", "simpo", 2.5, 0.1, 0.0, 1.0),
]


def main():
    gen = torch.Generator().manual_seed(44)
    cases = []
    for name, kind, beta, ftx, smoothing, gamma in CASES:
        pairs = 6
        chosen_tokens = torch.randint(1, 40, (pairs,), generator=gen).double()
        rejected_tokens = torch.randint(1, 40, (pairs,), generator=gen).double()
        # Summed log-probabilities: per token about -0.2 .. -3 (every one negative, as log-probabilities are).
        chosen = -(torch.rand(pairs, generator=gen, dtype=torch.float64) * 2.8 + 0.2) * chosen_tokens
        rejected = -(torch.rand(pairs, generator=gen, dtype=torch.float64) * 2.8 + 0.2) * rejected_tokens
        ref_chosen = chosen + torch.randn(pairs, generator=gen, dtype=torch.float64) * 3
        ref_rejected = rejected + torch.randn(pairs, generator=gen, dtype=torch.float64) * 3
        chosen.requires_grad_(True)
        rejected.requires_grad_(True)
        losses, metrics = preference_loss(kind, beta, ftx, smoothing, gamma, chosen, rejected, chosen_tokens,
                                          rejected_tokens, ref_chosen, ref_rejected)
        loss = losses.mean()
        loss.backward()
        if kind == "sigmoid" and smoothing == 0.0 and ftx == 0.0:
            trl = trl_sigmoid(beta, chosen.detach(), rejected.detach(), ref_chosen, ref_rejected)
            assert torch.allclose(trl, losses.detach(), rtol=1e-12, atol=0), (trl, losses)
        assert all(v == v for v in metrics.values()), metrics
        cases.append({
            "name": name, "pref_loss": kind, "pref_beta": beta, "pref_ftx": ftx, "dpo_label_smoothing": smoothing,
            "simpo_gamma": gamma,
            "chosen": chosen.detach().tolist(), "rejected": rejected.detach().tolist(),
            "chosen_tokens": [int(t) for t in chosen_tokens], "rejected_tokens": [int(t) for t in rejected_tokens],
            "reference_chosen": ref_chosen.tolist(), "reference_rejected": ref_rejected.tolist(),
            "loss": loss.item(), "d_chosen": chosen.grad.tolist(), "d_rejected": rejected.grad.tolist(),
            "metrics": metrics,
        })
        print(f"{name:32s} loss {loss.item():.6f} accuracies {metrics['rewards/accuracies']:.3f}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "cases.json").write_text(json.dumps({"cases": cases}, indent=1) + "\n")
    print(f"wrote {OUT / 'cases.json'}")


if __name__ == "__main__":
    main()
