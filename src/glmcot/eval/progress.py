"""Rich progress bars shared by the long commands (on stderr when stdout carries JSON)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)


def console(quiet: bool = False) -> Console:
    return Console(stderr=quiet)


def progress(quiet: bool = False) -> Progress:
    return Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                    console=console(quiet), transient=False)
