"""`glmcot train-mini`: build the glmcot-mini checkpoint in one command."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("train-mini")
    def train_mini(
        preset: str = typer.Option("cpu", "--preset", help="tiny (tests, seconds), cpu (at most 60 minutes of training on 2 cores, one thread) or gpu."),
        out: Optional[Path] = typer.Option(None, "--out", help="Checkpoint folder (default: <cache dir>/models/glmcot-mini)."),
        work_dir: Optional[Path] = typer.Option(None, "--work-dir", help="Graphs and examples (default: OUT.work beside the checkpoint)."),
        max_minutes: Optional[float] = typer.Option(None, "--max-minutes", help="Stop training at this wall time (preset's cap otherwise)."),
        max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Stop after this many optimiser steps."),
        seed: Optional[int] = typer.Option(None, "--seed", help="Model initialisation and batch order seed."),
        threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads (1 is faster on a machine loaded by other work: no thread waits for a descheduled peer)."),
        batch_tokens: Optional[int] = typer.Option(None, "--batch-tokens", help="Padded tokens per optimiser step (the preset's otherwise)."),
        glm_only: bool = typer.Option(False, "--glm-only", help="Train on the GLM agents' calls only (leave Graph-CoT's out)."),
        device: Optional[str] = typer.Option(None, "--device", help="cpu or cuda (the preset's otherwise)."),
        reuse_data: bool = typer.Option(False, "--reuse-data", help="Reuse the work folder's examples and tokenizer when an earlier build with the same data settings completed them."),
        as_json: bool = typer.Option(False, "--json", help="Print training.json when done."),
    ) -> None:
        """Trains glmcot-mini on the scripted policy's GLM calls over synthetic graphs and writes a
        standard checkpoint folder (native engine, transformers, vLLM)."""
        from glmcot.mini.checkpoint import default_path
        from glmcot.mini.config import preset as make_preset
        from glmcot.mini.pipeline import build

        try:
            config = make_preset(preset, max_minutes=max_minutes, max_steps=max_steps, seed=seed, threads=threads, device=device,
                                 batch_tokens=batch_tokens, skip_agents=("graphcot-thought", "graphcot-action") if glm_only else None)
        except ValueError as error:
            raise typer.BadParameter(str(error), param_hint="--preset") from None
        target = out or default_path()
        work = work_dir or target.with_name(target.name + ".work")
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=as_json)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console) as progress:
            # optimiser steps against the preset's step budget (a wall-time cap may end it sooner)
            task = progress.add_task("train-mini: data and tokenizer", total=config.max_steps)

            def on_train(entry: dict) -> None:
                if "step" in entry and "loss" in entry:
                    progress.update(task, completed=entry["step"],
                                    description=f"train-mini: loss {entry['loss']:.3f}")

            record = build(config, target, work, preset_name=preset, say=progress.console.print,
                           on_train=on_train, reuse_data=reuse_data)
        if as_json:
            sys.stdout.write(json.dumps(record, indent=2) + "\n")
