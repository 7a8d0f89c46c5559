"""The glmcot-mini training loop: plain torch over transformers' Qwen3ForCausalLM.

Each example is the compact prompt followed by the reply and the end-of-text token; the loss is
cross-entropy on the reply tokens only (the logits are computed only at those positions, which
also keeps the output layer cheap). AdamW, linear warmup then cosine decay, gradient clipping at
1.0, everything seeded. Steps stop at max_steps, after `epochs` passes, or at max_minutes of wall
time, whichever comes first; the log records which.
"""

from __future__ import annotations

import contextlib
import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glmcot.mini.config import TrainConfig
from glmcot.mini.data import Example

IGNORE = -100


@dataclass
class Encoded:
    ids: list[int]
    labels: list[int]  # IGNORE on prompt tokens
    weights: list[float] | None = None  # per-label loss weight (None: all 1)

    @property
    def reply_tokens(self) -> int:
        return sum(1 for label in self.labels if label != IGNORE)


_COPIED = re.compile(r'RetrieveNode\("([^"\n]+)"\)|RetrieveNode\[([^\]\n]+)\]')


def copied_spans(example: Example) -> list[tuple[int, int]]:
    """Character spans of the reply's RetrieveNode arguments that the prompt holds verbatim: the
    text the model must copy, not compose."""
    prompt = example.prompt
    spans = []
    for match in _COPIED.finditer(example.reply):
        group = 1 if match.group(1) is not None else 2
        if match.group(group) in prompt:
            spans.append(match.span(group))
    return spans


def encode(example: Example, tokenizer: Any, eos_id: int, copy_weight: float = 1.0) -> Encoded:
    """Segments one by one, as the native engine tokenises a segmented prompt. With copy_weight
    above 1, reply tokens inside a copied RetrieveNode argument weigh that much in the loss."""
    ids: list[int] = []
    for position, text in enumerate(example.segments):
        ids.extend(tokenizer.encode(text, add_special_tokens=position == 0))
    spans = copied_spans(example) if copy_weight != 1.0 else []
    if not spans:
        reply = tokenizer.encode(example.reply) + [eos_id]
        return Encoded(ids + reply, [IGNORE] * len(ids) + reply)
    reply_ids, offsets = tokenizer.encode_offsets(example.reply)
    weights = [copy_weight if any(start < end_ and begin < stop for start, stop in spans) else 1.0
               for begin, end_ in offsets]
    reply = reply_ids + [eos_id]
    return Encoded(ids + reply, [IGNORE] * len(ids) + reply, [0.0] * len(ids) + weights + [1.0])


def batches(items: list[Encoded], batch_tokens: int, rng: random.Random) -> list[list[Encoded]]:
    """Shuffled batches of similar length, each at most batch_tokens padded tokens."""
    order = items[:]
    rng.shuffle(order)
    out: list[list[Encoded]] = []
    chunk = 256  # sort within chunks: little padding, still shuffled
    for start in range(0, len(order), chunk):
        group = sorted(order[start:start + chunk], key=lambda item: len(item.ids))
        current: list[Encoded] = []
        for item in group:
            longest = max([len(item.ids)] + [len(c.ids) for c in current])
            if current and longest * (len(current) + 1) > batch_tokens:
                out.append(current)
                current = []
            current.append(item)
        if current:
            out.append(current)
    rng.shuffle(out)
    return out


def collate(batch: list[Encoded], pad_id: int):
    import torch

    length = max(len(item.ids) for item in batch)
    ids = torch.full((len(batch), length), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), length), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(batch), length), dtype=torch.long)
    weights = torch.ones((len(batch), length), dtype=torch.float32)
    for row, item in enumerate(batch):
        ids[row, : len(item.ids)] = torch.tensor(item.ids)
        labels[row, : len(item.labels)] = torch.tensor(item.labels)
        mask[row, : len(item.ids)] = 1
        if item.weights is not None:
            weights[row, : len(item.weights)] = torch.tensor(item.weights)
    return ids, labels, mask, weights


def reply_loss(model: Any, ids, labels, mask, weights=None):
    """Cross-entropy over reply tokens, weighted (mean of weights x loss over the weights' sum);
    logits only where a label exists. The count returned is the number of reply tokens."""
    import torch.nn.functional as F

    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
    targets = labels[:, 1:]
    where = targets != IGNORE
    logits = model.lm_head(hidden[:, :-1][where])
    if weights is None:
        return F.cross_entropy(logits.float(), targets[where]), int(where.sum())
    each = F.cross_entropy(logits.float(), targets[where], reduction="none")
    weight = weights[:, 1:][where]
    return (each * weight).sum() / weight.sum(), int(where.sum())


def build_model(config: TrainConfig, eos_id: int, pad_id: int):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(config.seed)
    hf = config.shape.hf_config(eos_id, pad_id)
    hf = {k: v for k, v in hf.items() if k not in ("architectures", "model_type", "torch_dtype")}
    model = Qwen3ForCausalLM(Qwen3Config(**hf))
    return model


@dataclass
class TrainResult:
    model: Any
    log: list[dict] = field(default_factory=list)
    eval_log: list[dict] = field(default_factory=list)
    steps: int = 0
    tokens_seen: int = 0        # all tokens fed (prompt and reply)
    reply_tokens_seen: int = 0  # tokens the loss was taken on
    wall_s: float = 0.0
    stopped_by: str = ""
    parameters: int = 0
    dropped_long: int = 0


def evaluate_loss(model: Any, items: list[Encoded], pad_id: int, batch_tokens: int, device: str = "cpu") -> float:
    import torch

    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches(items, batch_tokens, random.Random(0)):
            ids, labels, mask, _ = (t.to(device) for t in collate(batch, pad_id))
            loss, n = reply_loss(model, ids, labels, mask)
            total += float(loss) * n
            count += n
    model.train()
    return total / max(1, count)


def train(config: TrainConfig, train_examples: list[Example], eval_examples: list[Example], tokenizer: Any, *,
          progress: Callable[[dict], None] | None = None) -> TrainResult:
    import torch

    if config.threads:
        torch.set_num_threads(config.threads)
    eos_id = tokenizer.token_to_id("<|endoftext|>")
    pad_id = eos_id
    train_examples = [example for example in train_examples if example.agent not in config.skip_agents]
    encoded = [encode(example, tokenizer, eos_id, config.copy_weight) for example in train_examples]
    kept = [item for item in encoded if len(item.ids) <= config.max_length]
    if not kept:
        raise ValueError(f"no training example fits max_length={config.max_length} tokens")
    held = [item for item in (encode(e, tokenizer, eos_id) for e in eval_examples) if len(item.ids) <= config.max_length]
    held = random.Random(config.seed).sample(held, min(len(held), 200))
    random.seed(config.seed)
    model = build_model(config, eos_id, pad_id).to(config.device)
    model.train()
    # On a GPU the matrix products run in bf16 (weights, optimiser state and the loss stay fp32);
    # the CPU run keeps plain fp32, which is what the tests' reproducibility checks rely on.
    on_gpu = config.device.startswith("cuda")
    if on_gpu:
        torch.backends.cuda.matmul.allow_tf32 = True
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if on_gpu else contextlib.nullcontext()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=config.learning_rate, betas=(0.9, 0.95))
    rng = random.Random(config.seed)
    plan = [batches(kept, config.batch_tokens, rng) for _ in range(config.epochs)]
    total_steps = min(config.max_steps, sum(len(epoch) for epoch in plan))

    def rate(step: int, elapsed: float) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        progress_ = (step - config.warmup_steps) / max(1, total_steps - config.warmup_steps)
        if config.max_minutes is not None and config.time_schedule:
            # on a shared machine the wall-time cap may come first: decay by whichever ends sooner
            progress_ = max(progress_, elapsed / (60 * config.max_minutes))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress_)))

    result = TrainResult(model=model, parameters=sum(p.numel() for p in model.parameters()),
                         dropped_long=len(encoded) - len(kept))
    started = time.monotonic()
    step = 0
    result.stopped_by = "epochs"
    for epoch, epoch_batches in enumerate(plan):
        for batch in epoch_batches:
            if step >= config.max_steps:
                result.stopped_by = "max_steps"
                break
            if config.max_minutes is not None and time.monotonic() - started > 60 * config.max_minutes:
                result.stopped_by = "max_minutes"
                break
            for group in optimizer.param_groups:
                group["lr"] = config.learning_rate * rate(step, time.monotonic() - started)
            ids, labels, mask, weights = (t.to(config.device) for t in collate(batch, pad_id))
            with autocast:
                loss, reply_count = reply_loss(model, ids, labels, mask, weights)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            result.tokens_seen += int(mask.sum())
            result.reply_tokens_seen += reply_count
            if step % config.log_every == 0 or step == 1:
                entry = {"step": step, "epoch": epoch, "loss": round(loss.item(), 5), "lr": optimizer.param_groups[0]["lr"],
                         "tokens_seen": result.tokens_seen, "elapsed_s": round(time.monotonic() - started, 2)}
                result.log.append(entry)
                if progress:
                    progress(entry)
            if config.eval_every and held and step % config.eval_every == 0:
                result.eval_log.append({"step": step, "eval_loss": round(evaluate_loss(model, held, pad_id, config.batch_tokens, config.device), 5)})
                if progress:
                    progress(result.eval_log[-1])
        else:
            continue
        break
    if held:
        result.eval_log.append({"step": step, "eval_loss": round(evaluate_loss(model, held, pad_id, config.batch_tokens, config.device), 5)})
    result.steps = step
    result.wall_s = time.monotonic() - started
    model.eval()
    return result


def plot_loss(result: TrainResult, path: str | Path, title: str = "glmcot-mini training loss") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.6))
    steps, losses = [e["step"] for e in result.log], [e["loss"] for e in result.log]
    axis.plot(steps, losses, color="tab:blue", alpha=0.25, linewidth=0.8, label="train, one batch (reply tokens)")
    window = 25  # batches group examples of similar length, so single losses swing by agent type
    if len(losses) > window:
        smooth = [sum(losses[i - window:i]) / window for i in range(window, len(losses) + 1)]
        axis.plot(steps[window - 1:], smooth, color="tab:blue", label=f"train, mean of {window} logged batches")
    if result.eval_log:
        axis.plot([e["step"] for e in result.eval_log], [e["eval_loss"] for e in result.eval_log], "o-", color="tab:orange", label="held-out seeds")
    axis.set_xlabel("step")
    axis.set_ylabel("cross-entropy")
    axis.set_yscale("log")
    axis.set_title(title)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
