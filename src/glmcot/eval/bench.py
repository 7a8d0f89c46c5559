"""`glmcot bench`: the benchmarks under benchmarks/ behind one command, plus the ablation.

Each benchmarks/<name>.py is run as its own process (``python benchmarks/<name>.py``) so its
imports, threads and memory stay its own; ``--quick`` and ``--out`` are passed when the script
advertises them in its --help."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from glmcot.eval.config import EvalConfig

SCRIPTS = ("graph", "engine", "codesign", "agents")


def benchmarks_dir() -> Path:
    """benchmarks/ of the source checkout (glmcot is installed editable from it)."""
    import glmcot

    root = Path(glmcot.__file__).resolve().parents[2]
    candidate = root / "benchmarks"
    if not candidate.is_dir():
        candidate = Path.cwd() / "benchmarks"
    return candidate


def _supported_flags(script: Path) -> str:
    try:
        probe = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return ""
    return probe.stdout + probe.stderr


def run_script(name: str, quick: bool, out: Path, quiet: bool = False) -> dict[str, Any]:
    """Runs one benchmark script, streaming its table to the terminal; returns its JSON if found."""
    script = benchmarks_dir() / f"{name}.py"
    if not script.is_file():
        return {"benchmark": name, "status": "missing", "message": f"{script} does not exist yet"}
    help_text = _supported_flags(script)
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / f"{name}.json"
    command = [sys.executable, str(script)]
    if quick and "--quick" in help_text:
        command.append("--quick")
    if "--out" in help_text:
        command += ["--out", str(json_path)]
    elif "--json" in help_text:
        command += ["--json", str(json_path)]
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
              repeats: int = 1) -> dict[str, Any]:
    from rich.console import Console

    console = Console(stderr=quiet)
    names = list(SCRIPTS) + ["ablation"] if which == "all" else [which]
    results: dict[str, Any] = {}
    for name in names:
        console.rule(f"[bold]benchmark: {name}")
        if name == "ablation":
            from glmcot.eval.ablation import run_ablation_command

            results[name] = run_ablation_command(out=out, model=model, questions=questions, quick=quick,
                                                 config=config, quiet=quiet, domains=domains,
                                                 repeats=repeats)
        else:
            results[name] = run_script(name, quick, out, quiet)
            status = results[name]["status"]
            if status != "ok":
                console.print(f"[yellow]{name}: {status}[/] {results[name].get('message', '')}")
    from glmcot.eval.runner import write_json_atomic

    write_json_atomic(out / "bench.json", results)
    failed = [n for n, r in results.items() if isinstance(r, dict) and r.get("status") in ("failed", "missing")]
    if failed and not quiet:
        console.print(f"[yellow]not completed: {', '.join(failed)}[/]")
    return results
