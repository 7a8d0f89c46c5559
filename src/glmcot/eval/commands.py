"""Top-level commands of glmcot.eval."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Adds this package's commands to the main app."""
