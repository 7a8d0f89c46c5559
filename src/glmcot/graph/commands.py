"""`glmcot graph ...` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="graph commands.", no_args_is_help=True)
