"""One command from nothing to a checkpoint: synthetic graphs -> examples -> tokenizer -> training
-> checkpoint folder with its record."""

from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from glmcot.mini.config import TrainConfig


def build(config: TrainConfig, out: str | Path, work_dir: str | Path, *, preset_name: str = "custom",
          say: Callable[[str], None] = print, command: str | None = None,
          on_train: Callable[[dict], None] | None = None, reuse_data: bool = False) -> dict:
    """Returns the training record written to training.json. `on_train` gets each training log
    entry (step, loss, tokens seen; or an eval loss) as it is made. `reuse_data`: take the work
    folder's examples and tokenizer when an earlier build with the same data settings completed them."""
    from glmcot.mini.checkpoint import code_version, train_tokenizer, write_checkpoint
    from glmcot.engine.models.tokenizer import load_tokenizer
    from glmcot.mini.data import Collected, collect, read_examples, write_examples
    from glmcot.mini.train import plot_loss, train

    started = time.monotonic()
    version = code_version()  # the code that runs, not what is checked out when it ends
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    fingerprint = json.dumps({"data": asdict(config.data), "vocab_size": config.shape.vocab_size}, sort_keys=True)
    reused = reuse_data and _data_matches(work, fingerprint)
    if reused:
        collected = Collected(read_examples(work / "train.jsonl"), read_examples(work / "eval.jsonl"),
                              json.loads((work / "eval_questions.json").read_text(encoding="utf-8")),
                              json.loads((work / "data.json").read_text(encoding="utf-8"))["counts"])
        tokenizer = load_tokenizer(work / "tokenizer")
        say(f"data: reused {work} ({collected.counts})")
    else:
        (work / "data.json").unlink(missing_ok=True)
        collected = collect(config.data, work / "graphs", progress=lambda line: say(f"data: {line}"))
        write_examples(collected.train, work / "train.jsonl")
        write_examples(collected.eval, work / "eval.jsonl")
        (work / "eval_questions.json").write_text(json.dumps(collected.eval_questions, ensure_ascii=False), encoding="utf-8")
        say(f"data: {collected.counts}")
        corpus = "\n".join(sorted({e.prompt + e.reply for e in collected.train}))
        tokenizer = train_tokenizer(corpus, config.shape.vocab_size, work)
        # written last: its presence says the examples and tokenizer above are complete
        (work / "data.json").write_text(json.dumps({"fingerprint": fingerprint, "counts": collected.counts}), encoding="utf-8")
    say(f"tokenizer: {tokenizer.vocab_size} ids")
    data_s = time.monotonic() - started

    def report(entry: dict) -> None:
        say("train: " + " ".join(f"{k}={v}" for k, v in entry.items()))
        if on_train is not None:
            on_train(entry)

    result = train(config, collected.train, collected.eval, tokenizer, progress=report)
    log = {"train": result.log, "eval": result.eval_log}
    (work / "train_log.json").write_text(json.dumps(log, indent=1), encoding="utf-8")
    plot_loss(result, work / "loss.png")
    training = {
        "command": command or shlex.join(["glmcot", *sys.argv[1:]]),
        "preset": preset_name,
        "code_version": version,
        "seed": config.seed,
        "data_reused": reused,
        "data": {"train_seeds": list(config.data.train_seeds), "eval_seeds": list(config.data.eval_seeds),
                 "domains": list(config.data.domains), "questions_per_template": config.data.questions_per_template,
                 "fault_rate": config.data.fault_rate, "graphcot_seeds": list(config.data.graphcot_seeds),
                 "copy_drills": config.data.copy_drills, "made_up_drills": config.data.made_up_drills, **collected.counts, "dropped_too_long": result.dropped_long},
        "shape": asdict(config.shape),
        "parameters": result.parameters,
        "steps": result.steps,
        "stopped_by": result.stopped_by,
        "tokens_seen": result.tokens_seen,
        "reply_tokens_seen": result.reply_tokens_seen,
        "final_train_loss": result.log[-1]["loss"] if result.log else None,
        "final_eval_loss": result.eval_log[-1]["eval_loss"] if result.eval_log else None,
        "train_wall_s": round(result.wall_s, 1),
        "data_wall_s": round(data_s, 1),
        "hyper": {"learning_rate": config.learning_rate, "batch_tokens": config.batch_tokens, "max_length": config.max_length,
                  "warmup_steps": config.warmup_steps, "weight_decay": config.weight_decay, "max_steps": config.max_steps,
                  "max_minutes": config.max_minutes, "epochs": config.epochs, "device": config.device,
                  "time_schedule": config.time_schedule, "copy_weight": config.copy_weight, "threads": config.threads,
                  "skip_agents": list(config.skip_agents)},
        "label": "glmcot-mini, trained on synthetic data (scripted-policy traces)",
    }
    write_checkpoint(out, result.model, tokenizer, training, {"loss.png": work / "loss.png", "train_log.json": work / "train_log.json"})
    say(f"checkpoint: {out}")
    return training


def _data_matches(work: Path, fingerprint: str) -> bool:
    """True when `work` holds a completed collection made with these data settings."""
    try:
        record = json.loads((work / "data.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    needed = ("train.jsonl", "eval.jsonl", "eval_questions.json", "tokenizer/tokenizer.json")
    return record.get("fingerprint") == fingerprint and all((work / name).is_file() for name in needed)
