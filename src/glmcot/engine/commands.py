"""`glmcot engine ...` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="engine commands.", no_args_is_help=True)
