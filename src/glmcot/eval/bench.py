"""`glmcot bench`: the benchmarks of glmcot.benchmarks behind one command, plus the ablation.

Each benchmark runs as its own process (``python -m glmcot.benchmarks.NAME ARGS``) so its imports,
threads and memory stay its own; it needs only an installed glmcot, no source checkout. Arguments
after ``--`` go to the benchmark unchanged (``glmcot bench codesign -- --kv-tokens 4096``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from glmcot.benchmarks import NAMES
from glmcot.eval.config import EvalConfig

MAIN = ("graph", "engine", "codesign", "agents")  # what `all` runs, then the ablation
QUICK = ("graph", "engine", "codesign", "kvsim")  # the ones with a --quick run


def benchmark_command(name: str, args: list[str], quick: bool, json_path: Path) -> list[str]:
    """The process to start: the module, --quick where it has one, --out unless the caller gave one."""
    if name not in NAMES:
        raise ValueError(f"unknown benchmark {name!r}; choose from {', '.join(NAMES)}")
    command = [sys.executable, "-m", f"glmcot.benchmarks.{name}"]
    if quick and name in QUICK and "--quick" not in args:
        command.append("--quick")
    if not any(arg == "--out" or arg.startswith("--out=") for arg in args):
        command += ["--out", str(json_path)]
    return command + list(args)


def run_benchmark(name: str, quick: bool, out: Path, quiet: bool = False, args: list[str] | None = None) -> dict[str, Any]:
    """Runs one benchmark, streaming its table to the terminal; returns its JSON when it wrote one."""
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / f"{name}.json"
    command = benchmark_command(name, list(args or []), quick, json_path)
    start = time.perf_counter()
    process = subprocess.run(command, capture_output=quiet, text=True)
    result: dict[str, Any] = {"benchmark": name, "command": " ".join(command), "returncode": process.returncode,
                              "wall_s": round(time.perf_counter() - start, 2),
                              "status": "ok" if process.returncode == 0 else "failed"}
    if json_path.is_file():
        try:
            result["results"] = json.loads(json_path.read_text())
        except ValueError:
            result["results_file"] = str(json_path)
    if quiet and process.returncode != 0:
        result["stderr_tail"] = (process.stderr or "")[-2000:]
    return result


def run_bench(which: str, *, quick: bool, out: Path, model: str, questions: int | None,
              config: EvalConfig, quiet: bool = False, domains: list[str] | None = None,
              repeats: int = 1, args: list[str] | None = None, workload: str = "shared-vertices") -> dict[str, Any]:
    from rich.console import Console

    console = Console(stderr=quiet)
    names = list(MAIN) + ["ablation"] if which == "all" else [which]
    results: dict[str, Any] = {}
    for name in names:
        console.rule(f"[bold]benchmark: {name}")
        if name == "ablation":
            from glmcot.eval.ablation import run_ablation_command

            results[name] = run_ablation_command(out=out, model=model, questions=questions, quick=quick,
                                                 config=config, quiet=quiet, domains=domains,
                                                 repeats=repeats, workload=workload)
        else:
            results[name] = run_benchmark(name, quick, out, quiet, args if which != "all" else None)
            status = results[name]["status"]
            if status != "ok":
                console.print(f"[yellow]{name}: {status}[/] {results[name].get('message', '')}")
    from glmcot.files import write_json_atomic

    write_json_atomic(out / "bench.json", results)
    failed = [n for n, r in results.items() if isinstance(r, dict) and r.get("status") in ("failed", "missing")]
    if failed and not quiet:
        console.print(f"[yellow]not completed: {', '.join(failed)}[/]")
    return results
