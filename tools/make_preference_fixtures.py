#!/usr/bin/env python3
"""Write the preference-training fixtures under tests/fixtures/ (run by hand, never by CI).

Usage, from the repository root (Python 3 with torch 2.x, transformers 5.x, safetensors; CPU only):

    python3 tools/make_preference_fixtures.py

tests/fixtures/preference/ holds one tiny random Qwen2 model (model/: vocab 64, hidden 32, 2 layers), 12 tokenized
preference pairs (data/train.jsonl in LLaMA-Factory's processed columns chosen_input_ids, chosen_labels,
rejected_input_ids, rejected_labels: a shared prompt masked with -100, each response trained) and, per case
(dpo_sigmoid, dpo_sigmoid_ftx, dpo_hinge, dpo_ipo, dpo_orpo, dpo_simpo), <case>/model and <case>/data (links to the
shared ones), <case>/train.yaml, <case>/reference.json
(per step: loss, pre-clip gradient norm, learning rate, and LLaMA-Factory's logged metrics rewards/chosen,
rewards/rejected, rewards/accuracies, rewards/margins, logps/chosen, logps/rejected, sft_loss, odds_ratio_loss) and
<case>/reference/final.safetensors (fp32) and final_fp64.safetensors (the same run in float64 from the same initial
weights and data, stored as F64). The training loop: the reference log-probabilities of every pair are computed
first with the starting weights (none for orpo and simpo), then 3 steps of 4 pairs each, each batch's chosen and
rejected sequences in one forward ([chosen0, rejected0, chosen1, ...], right-padded), the loss as below, AdamW
(torch.optim.AdamW, weight decay on matrices only), global-norm clipping at 1.0, a linear schedule.

tests/fixtures/preference_loss/cases.json holds, per case (each pref_loss with its options: pref_beta, pref_ftx,
dpo_label_smoothing, simpo_gamma), a few pairs of per-sequence log-probabilities (each response's SUMMED
log-probability and its response token count, for the policy and, where the loss uses one, the reference) and what
LLaMA-Factory's CustomDPOTrainer computes from them: the batch loss (the mean over pairs), its gradient with respect
to every summed log-probability (PyTorch autograd, float64), and the logged metrics (rewards/chosen,
rewards/rejected, rewards/accuracies, rewards/margins, logps/chosen, logps/rejected, sft_loss, odds_ratio_loss).

tests/fixtures/preference/kto and kto_ftx (stage kto) read data_kto/ instead (linked as their data/): 12 tokenized
KTO examples in LLaMA-Factory's processed columns (input_ids, labels, kl_input_ids, kl_labels, kto_tags), each
example's KL sequence its prompt with the previous example's completion (the first takes the last: the "+1 offset"
of FeedbackDatasetProcessor over one map batch). The KTO run: every example's reference log-probabilities of its
completion and its KL sequence first, then 3 steps of 4 examples: the completions in one forward (with gradient),
the KL sequences in another (no gradient, as LLaMA-Factory's concatenated_forward), the loss of LLaMA-Factory's
CustomKTOTrainer.get_batch_loss_metrics with TRL's kto_loss: kl = max(0, mean(policy KL - reference KL)),
desirable w_d (1 - sigmoid(beta (r - kl))), undesirable w_u (1 - sigmoid(beta (kl - r))), their mean, plus
ftx * mean(-chosen_logps_avg) / C * N; metrics rewards/chosen, rewards/rejected, rewards/margins, logps/chosen,
logps/rejected (means over the desirable or undesirable examples), kl, and sft_loss (mean of -chosen_logps_avg). The
loss is also checked against TRL's own expressions as trl (pip) writes them in KTOTrainer._compute_loss.

The loss formulas below follow LLaMA-Factory 0.9's train/dpo/trainer.py (concatenated_forward: ipo, orpo and simpo
average each sequence's log-probability over its response tokens, the reference's too; odds_ratio_loss, simpo_loss,
pref_ftx's "losses += ftx_gamma * sft_loss" with sft_loss = -chosen_logps_avg) and TRL's dpo_loss for sigmoid,
hinge and ipo. The sigmoid loss is also checked against TRL's own expression as trl (pip) writes it in
DPOTrainer._compute_loss: -logsigmoid(beta * delta_score) with delta_score the difference of the policy/reference
log-ratios (label smoothing 0).
"""

import json
import random
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import lr_factor, yaml_scalar  # noqa: E402

from safetensors.torch import save_file  # noqa: E402
from transformers import Qwen2Config, Qwen2ForCausalLM  # noqa: E402

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


VOCAB = 64
PAIRS = 12
TRAINING = dict(batch_size=4, num_steps=3, learning_rate=1e-3, lr_scheduler="linear", warmup_steps=0,
                min_lr_ratio=0.0, weight_decay=0.1, max_grad_norm=1.0, beta1=0.9, beta2=0.999, eps=1e-8)
TRAIN_CASES = [
    # case, pref_loss, pref_beta, pref_ftx, dpo_label_smoothing, simpo_gamma
    ("dpo_sigmoid", "sigmoid", 0.1, 0.0, 0.0, 0.5),
    ("dpo_sigmoid_ftx", "sigmoid", 0.5, 0.5, 0.1, 0.5),
    ("dpo_hinge", "hinge", 0.1, 0.0, 0.0, 0.5),
    ("dpo_ipo", "ipo", 0.1, 0.0, 0.0, 0.5),
    ("dpo_orpo", "orpo", 0.1, 0.0, 0.0, 0.5),
    ("dpo_simpo", "simpo", 2.0, 0.0, 0.0, 0.5),
]


def tiny_model():
    """A random Qwen2 (vocab 64, hidden 32, 2 layers, GQA 4:2, untied head), every parameter perturbed."""
    torch.manual_seed(44)
    config = Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         rms_norm_eps=1e-6, tie_word_embeddings=False, use_sliding_window=False,
                         rope_parameters={"rope_type": "default", "rope_theta": 100.0})
    config._attn_implementation = "eager"
    model = Qwen2ForCausalLM(config).to(torch.float32)
    gen = torch.Generator().manual_seed(1044)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and "norm" in name:
                p.copy_(1.0 + torch.randn(p.shape, generator=gen) * 0.1)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)  # large enough that responses differ in logp
    return model


def make_pairs():
    """12 pairs: a prompt of 2..8 tokens shared, responses of 2..7 tokens, chosen != rejected."""
    rng = random.Random(44)
    pairs = []
    while len(pairs) < PAIRS:
        prompt = [rng.randrange(1, VOCAB) for _ in range(rng.randint(2, 8))]
        chosen = [rng.randrange(1, VOCAB) for _ in range(rng.randint(2, 7))]
        rejected = [rng.randrange(1, VOCAB) for _ in range(rng.randint(2, 7))]
        if chosen == rejected:
            continue
        pairs.append({"chosen_input_ids": prompt + chosen, "chosen_labels": [-100] * len(prompt) + chosen,
                      "rejected_input_ids": prompt + rejected, "rejected_labels": [-100] * len(prompt) + rejected})
    return pairs


def sequence_logps(model, pairs, dtype):
    """Summed log-probabilities and response token counts of [chosen0, rejected0, chosen1, ...] in one forward."""
    seqs = []
    for p in pairs:
        seqs.append((p["chosen_input_ids"], p["chosen_labels"]))
        seqs.append((p["rejected_input_ids"], p["rejected_labels"]))
    return batch_logps(model, seqs, dtype)


def adamw_and_schedule(model, t):
    """torch.optim.AdamW (weight decay on matrices only) and the run's schedule as a LambdaLR."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": t["weight_decay"]},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=t["learning_rate"], betas=(t["beta1"], t["beta2"]), eps=t["eps"],
                                  foreach=False, fused=False)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, t["lr_scheduler"], t["warmup_steps"], t["num_steps"], t["min_lr_ratio"]))
    return optimizer, scheduler


def train_case(kind, beta, ftx, smoothing, gamma, pairs, dtype):
    """The run of one case in `dtype`: per-step records and the final state dict."""
    model = tiny_model().to(dtype)
    t = TRAINING
    reference = None
    if kind not in ("orpo", "simpo"):
        with torch.no_grad():  # every pair's reference, in batches of batch_size pairs, before the first step
            reference = torch.cat([sequence_logps(model, pairs[i:i + t["batch_size"]], dtype)[0]
                                   for i in range(0, len(pairs), t["batch_size"])])
    optimizer, scheduler = adamw_and_schedule(model, t)
    steps = []
    for step in range(t["num_steps"]):
        batch = pairs[step * t["batch_size"]:(step + 1) * t["batch_size"]]
        logps, tokens = sequence_logps(model, batch, dtype)
        ref = reference[2 * step * t["batch_size"]:2 * (step + 1) * t["batch_size"]] if reference is not None else None
        losses, metrics = preference_loss(kind, beta, ftx, smoothing, gamma, logps[0::2], logps[1::2], tokens[0::2],
                                          tokens[1::2], ref[0::2] if ref is not None else None,
                                          ref[1::2] if ref is not None else None)
        if kind == "sigmoid" and smoothing == 0.0 and ftx == 0.0:
            trl = trl_sigmoid(beta, logps[0::2], logps[1::2], ref[0::2], ref[1::2])
            assert torch.allclose(trl, losses, rtol=1e-6, atol=0), (trl, losses)
        loss = losses.mean()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), t["max_grad_norm"])
        lr = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        steps.append({"loss": loss.item(), "grad_norm": grad_norm.item(), "lr": lr, "metrics": metrics})
    return steps, {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


KTO_EXAMPLES = 12
KTO_CASES = [
    # case, pref_beta, kto_chosen_weight, kto_rejected_weight, pref_ftx, learning_rate
    ("kto", 0.1, 1.0, 1.33, 0.0, 2e-2),
    ("kto_ftx", 0.5, 0.8, 1.0, 0.5, 2e-2),
]


def make_kto_examples():
    """12 examples: a prompt of 2..8 tokens, a completion of 2..7, tagged so every batch of 4 has both kinds; each
    KL sequence is the prompt with the previous example's completion (the first takes the last)."""
    rng = random.Random(45)
    prompts = [[rng.randrange(1, VOCAB) for _ in range(rng.randint(2, 8))] for _ in range(KTO_EXAMPLES)]
    completions = [[rng.randrange(1, VOCAB) for _ in range(rng.randint(2, 7))] for _ in range(KTO_EXAMPLES)]
    tags = [True, False, True, True, False, True, False, False, True, False, True, True]
    kl_completions = [completions[-1]] + completions[:-1]
    return [{"input_ids": p + c, "labels": [-100] * len(p) + c, "kl_input_ids": p + k,
             "kl_labels": [-100] * len(p) + k, "kto_tags": t}
            for p, c, k, t in zip(prompts, completions, kl_completions, tags)]


def batch_logps(model, seqs, dtype):
    """Summed log-probabilities and target counts of (ids, labels) sequences, right-padded, in one forward."""
    longest = max(len(ids) for ids, _ in seqs)
    ids = torch.tensor([i + [0] * (longest - len(i)) for i, _ in seqs])
    mask = torch.tensor([[1] * len(i) + [0] * (longest - len(i)) for i, _ in seqs])
    labels = torch.tensor([l + [-100] * (longest - len(l)) for _, l in seqs])
    logits = model(input_ids=ids, attention_mask=mask).logits.to(dtype)
    labels = labels[:, 1:]
    logits = logits[:, :-1]
    valid = labels != -100
    per_token = torch.gather(logits.log_softmax(-1), 2, labels.clamp(min=0).unsqueeze(2)).squeeze(2)
    return (per_token * valid).sum(-1), valid.sum(-1).to(dtype)


def kto_loss(beta, w_d, w_u, ftx, logps, tokens, tags, ref, kl_logps, ref_kl):
    """LLaMA-Factory's CustomKTOTrainer.get_batch_loss_metrics with TRL 0.9's kto_loss, from summed log-probabilities."""
    kl = (kl_logps - ref_kl).mean().clamp(min=0)
    chosen, rejected = logps[tags], logps[~tags]
    chosen_ratio, rejected_ratio = chosen - ref[tags], rejected - ref[~tags]
    chosen_losses = 1 - torch.sigmoid(beta * (chosen_ratio - kl))
    rejected_losses = 1 - torch.sigmoid(beta * (kl - rejected_ratio))
    loss = torch.cat((w_d * chosen_losses, w_u * rejected_losses), 0).nanmean()
    chosen_avg = chosen / tokens[tags]
    if ftx > 1e-6 and len(chosen) > 0:
        loss = loss + ftx * (-chosen_avg).nanmean() / len(chosen) * len(tags)
    chosen_rewards, rejected_rewards = beta * chosen_ratio.detach(), beta * rejected_ratio.detach()
    metrics = {"rewards/chosen": chosen_rewards.mean().item(), "rewards/rejected": rejected_rewards.mean().item(),
               "rewards/margins": (chosen_rewards.mean() - rejected_rewards.mean()).item(),
               "logps/chosen": chosen.detach().mean().item(), "logps/rejected": rejected.detach().mean().item(),
               "kl": kl.item(), "sft_loss": (-chosen_avg).detach().mean().item()}
    return loss, metrics


def trl_kto(beta, w_d, w_u, logps, tags, ref, kl_logps, ref_kl):
    """TRL KTOTrainer._compute_loss, loss_type kto, one process: the mean of the weighted per-example losses."""
    kl = (kl_logps - ref_kl).mean().detach().clamp(min=0)
    chosen_logratios = logps[tags] - ref[tags]
    chosen_losses = 1 - F.sigmoid(beta * (chosen_logratios - kl))
    rejected_logratios = logps[~tags] - ref[~tags]
    rejected_losses = 1 - F.sigmoid(beta * (kl - rejected_logratios))
    losses = torch.cat((w_d * chosen_losses, w_u * rejected_losses), 0)
    return losses.nanmean()


def train_kto_case(beta, w_d, w_u, ftx, lr, examples, dtype):
    """The run of one KTO case in `dtype`: per-step records and the final state dict."""
    model = tiny_model().to(dtype)
    t = dict(TRAINING, learning_rate=lr)
    n = t["batch_size"]
    completion = lambda batch: [(e["input_ids"], e["labels"]) for e in batch]  # noqa: E731
    kl_sequences = lambda batch: [(e["kl_input_ids"], e["kl_labels"]) for e in batch]  # noqa: E731
    with torch.no_grad():  # every example's reference, in batches of batch_size examples, before the first step
        ref = torch.cat([batch_logps(model, completion(examples[i:i + n]), dtype)[0] for i in range(0, len(examples), n)])
        ref_kl = torch.cat([batch_logps(model, kl_sequences(examples[i:i + n]), dtype)[0]
                            for i in range(0, len(examples), n)])
    optimizer, scheduler = adamw_and_schedule(model, t)
    steps = []
    for step in range(t["num_steps"]):
        batch = examples[step * n:(step + 1) * n]
        tags = torch.tensor([e["kto_tags"] for e in batch])
        logps, tokens = batch_logps(model, completion(batch), dtype)
        with torch.no_grad():
            kl_logps, _ = batch_logps(model, kl_sequences(batch), dtype)
        r, r_kl = ref[step * n:(step + 1) * n], ref_kl[step * n:(step + 1) * n]
        loss, metrics = kto_loss(beta, w_d, w_u, ftx, logps, tokens, tags, r, kl_logps, r_kl)
        if ftx == 0.0:
            trl = trl_kto(beta, w_d, w_u, logps, tags, r, kl_logps, r_kl)
            assert torch.allclose(trl, loss, rtol=1e-6, atol=0), (trl, loss)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), t["max_grad_norm"])
        lr_now = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        steps.append({"loss": loss.item(), "grad_norm": grad_norm.item(), "lr": lr_now, "metrics": metrics})
    return steps, {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def write_case_files(root, case, data, steps, final, steps64, final64, preference, stage_keys, learning_rate):
    """<case>/{model,data} links, reference/final(_fp64).safetensors, reference.json and train.yaml."""
    out = root / case
    (out / "reference").mkdir(parents=True, exist_ok=True)
    for shared, target in (("model", "model"), ("data", data)):  # every case reads one model and one data set
        link = out / shared
        if link.is_symlink():
            link.unlink()
        link.symlink_to(Path("..") / target)
    save_file(final, out / "reference" / "final.safetensors")
    save_file(final64, out / "reference" / "final_fp64.safetensors")
    worst = max(abs(a["loss"] - b["loss"]) / abs(b["loss"]) for a, b in zip(steps, steps64))
    t = TRAINING
    (out / "reference.json").write_text(json.dumps({
        "case": case, "architecture": "Qwen2ForCausalLM", "preference": preference,
        "training": dict(t, learning_rate=learning_rate),
        "losses": [s["loss"] for s in steps], "grad_norms": [s["grad_norm"] for s in steps],
        "lrs": [s["lr"] for s in steps], "metrics": [s["metrics"] for s in steps],
        "notes": {"fp32_vs_fp64_worst_loss_relative": worst},
    }, indent=1) + "\n")
    training = dict(stage_keys, batch_size=t["batch_size"], gradient_accumulation_steps=1, num_steps=t["num_steps"],
                    learning_rate=learning_rate, lr_scheduler=t["lr_scheduler"], warmup_steps=t["warmup_steps"],
                    weight_decay=t["weight_decay"], max_grad_norm=t["max_grad_norm"], checkpoint_interval=1, seed=44,
                    output_dir="output", logging_steps=1)
    sections = {
        "model": {"name": "model", "dtype": "float32"},
        "dataset": {"name": "fixture", "dataset_dir": "data", "max_seq_len": 64, "shuffle": False, "num_workers": 0},
        "training": training,
        "optimizer": {"beta1": t["beta1"], "beta2": t["beta2"], "eps": t["eps"]},
    }
    lines = [f"# Preference fixture '{case}' (written by tools/make_preference_fixtures.py; do not edit by hand)."]
    for section, kv in sections.items():
        lines.append(f"{section}:")
        lines.extend(f"  {k}: {yaml_scalar(v)}" for k, v in kv.items())
    (out / "train.yaml").write_text("\n".join(lines) + "\n")
    print(f"{case:18s} losses {[round(s['loss'], 6) for s in steps]} fp32 vs fp64 {worst:.2e}")


def write_kto_cases(root):
    (root / "data_kto").mkdir(parents=True, exist_ok=True)
    examples = make_kto_examples()
    (root / "data_kto" / "train.jsonl").write_text("".join(json.dumps(e) + "\n" for e in examples))
    (root / "data_kto" / "dataset_info.json").write_text(json.dumps(
        {"fixture": {"file_name": "train.jsonl", "formatting": "tokenized", "columns": {"kto_tag": "kto_tags"}}},
        indent=2) + "\n")
    for case, beta, w_d, w_u, ftx, lr in KTO_CASES:
        steps, final = train_kto_case(beta, w_d, w_u, ftx, lr, examples, torch.float32)
        steps64, final64 = train_kto_case(beta, w_d, w_u, ftx, lr, examples, torch.float64)
        print(f"{case:18s} kl {[round(s['metrics']['kl'], 6) for s in steps]}")
        keys = {"stage": "kto", "pref_beta": beta, "kto_chosen_weight": w_d, "kto_rejected_weight": w_u,
                "pref_ftx": ftx}
        write_case_files(root, case, "data_kto", steps, final, steps64, final64, keys, keys, lr)


def write_training_cases():
    root = ROOT / "tests" / "fixtures" / "preference"
    (root / "model").mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(parents=True, exist_ok=True)
    tiny_model().save_pretrained(root / "model", safe_serialization=True)
    pairs = make_pairs()
    (root / "data" / "train.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    (root / "data" / "dataset_info.json").write_text(json.dumps(
        {"fixture": {"file_name": "train.jsonl", "formatting": "tokenized", "ranking": True}}, indent=2) + "\n")
    for case, kind, beta, ftx, smoothing, gamma in TRAIN_CASES:
        steps, final = train_case(kind, beta, ftx, smoothing, gamma, pairs, torch.float32)
        steps64, final64 = train_case(kind, beta, ftx, smoothing, gamma, pairs, torch.float64)
        preference = {"pref_loss": kind, "pref_beta": beta, "pref_ftx": ftx, "dpo_label_smoothing": smoothing,
                      "simpo_gamma": gamma}
        write_case_files(root, case, "data", steps, final, steps64, final64, preference,
                         dict({"stage": "dpo"}, **preference), TRAINING["learning_rate"])


def main():
    write_training_cases()
    write_kto_cases(ROOT / "tests" / "fixtures" / "preference")
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
