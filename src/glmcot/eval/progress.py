"""Rich progress bars shared by the long commands (on stderr when stdout carries JSON)."""

from __future__ import annotations

import os

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)


def console(quiet: bool = False) -> Console:
    """A console on stdout (stderr when quiet). Written to a file or a pipe, it has no width to fit,
    so its tables are laid out 200 columns wide instead of cut at 80 (unless COLUMNS says)."""
    out = Console(stderr=quiet)
    if not out.is_terminal and not os.environ.get("COLUMNS"):
        out = Console(stderr=quiet, width=200)
    return out


def progress(quiet: bool = False) -> Progress:
    return Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                    console=console(quiet), transient=False)
