"""Top-level commands of glmcot.system: `glmcot exec` (one snippet in a built system's sandbox)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Adds this package's commands to the main app."""
    app.command("exec")(exec_snippet)


def exec_snippet(
    file: str = typer.Argument(..., help="The snippet file to run, or - to read it from stdin."),
    graph: Path = typer.Option(..., "--graph", "-g", help="Graph store directory (or a dataset directory holding graph/)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON object (output, error, touched nodes, calls, timings)."),
    retriever: str = typer.Option("auto", help="RetrieveNode: auto (the embedding index if built, else lexical), embedding, or lexical."),
    timeout: float = typer.Option(10.0, help="Wall-clock limit in seconds (the worker is killed past it)."),
    cpu: float = typer.Option(5.0, help="CPU-time limit in seconds."),
    memory_mb: int = typer.Option(512, help="Memory limit for the snippet's data, in MiB (RLIMIT_DATA; the mmapped graph does not count)."),
    max_output: int = typer.Option(8000, help="Most characters the snippet may print."),
) -> None:
    """Run one A-Agent style snippet through the sandbox (the five primitives and print only) and
    print its output, or the structured error. Exit code 1 when the snippet failed."""
    from glmcot.agents.sandbox import SandboxError, SandboxLimits
    from glmcot.system import BackendCheck, SetupError, SystemConfig, build_system

    from glmcot.terminal import safe_text

    if file == "-":
        code = _snippet_text(sys.stdin.buffer.read(), "standard input")
    else:
        path = Path(file)
        if not path.is_file():
            raise typer.BadParameter(f"no such file: {file}", param_hint="FILE")
        code = _snippet_text(path.read_bytes(), file)
    limits = SandboxLimits(wall_s=timeout, cpu_s=cpu, memory_mb=memory_mb, max_output=max_output)
    # no LLM: a snippet needs the graph, RetrieveNode and the sandbox only
    config = SystemConfig(graphs={"graph": graph}, retriever=retriever, workers=1, limits=limits,
                          check=BackendCheck.SKIP)
    try:
        system = build_system(config)
    except SetupError as error:
        raise typer.BadParameter(f"no graph directory at {graph}: {error}", param_hint="--graph") from None
    except SandboxError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    except Exception as error:
        raise typer.BadParameter(f"{type(error).__name__}: {error}", param_hint="--retriever") from None
    try:
        context = system.context()
        result = context.executor.run(code, resolve=context.retrieval.resolve)
    except SandboxError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    finally:
        system.close()
    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    elif result.ok:
        sys.stdout.write(safe_text(result.output))   # the snippet's text is shown, never obeyed
    else:
        if result.output:
            sys.stdout.write(safe_text(result.output))
        typer.echo(safe_text(f"error ({result.error.get('kind')}): {result.error_text()}"), err=True)
    if not result.ok:
        raise typer.Exit(1)


def _snippet_text(data: bytes, where: str) -> str:
    """The snippet's source; a clear error (exit 2) when it is not UTF-8 text."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise typer.BadParameter(f"{where} is not UTF-8 text: byte 0x{data[error.start]:02x} at offset "
                                 f"{error.start} (line {line}); save the snippet as UTF-8", param_hint="FILE") from None
