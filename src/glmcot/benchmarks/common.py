"""What every benchmark's output shares: the run header, the number formats, the JSON and figure files.

One home for each, so two benchmarks never report the same thing two ways (a percentile by another
rank rule, a JSON file half-written by a crash, a header without the command that made it).
"""

from __future__ import annotations

import math
import os
import platform
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (a value that occurred, never an interpolation), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))]


def signed(value: float | None) -> str:
    """An effect (points or percent) with its sign, one decimal; "n/a" where it was not measured."""
    return "n/a" if value is None else f"{value:+.1f}"


def program_name() -> str:
    """The script's file name, as the command line names it: a package run with `python -m` is
    named after its folder (`codesign.py`), not after its `__main__.py`."""
    script = Path(sys.argv[0])
    return f"{script.parent.name}.py" if script.name == "__main__.py" else script.name


def run_header(argv: list[str] | None) -> dict[str, Any]:
    """The JSON fields a result starts with: when, which command, which machine."""
    return {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([program_name(), *(argv if argv is not None else sys.argv[1:])]),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()}}


def save_figure(figure, path: Path, dpi: int = 120) -> Path:
    """Lays out, writes and closes a matplotlib figure."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path
