"""The `glmcot` command line.

Each package owns its commands: sub-apps (`glmcot graph ...`, `glmcot data ...`,
`glmcot engine ...`) and top-level commands registered by `register(app)`. Command modules import
heavy dependencies (torch, faiss) inside the command functions so `glmcot --help` stays fast.
"""

from __future__ import annotations

import typer

from glmcot.data import commands as data_commands
from glmcot.engine import commands as engine_commands
from glmcot.eval import commands as eval_commands
from glmcot.graph import commands as graph_commands
from glmcot.mcp import commands as mcp_commands
from glmcot.mini import commands as mini_commands
from glmcot.serve import commands as serve_commands
from glmcot.system import commands as system_commands

app = typer.Typer(
    name="glmcot",
    rich_markup_mode=None,  # help texts show their [default ...] and [env ...] as written, not as markup
    help="Graph chain-of-thought QA over knowledge graphs with LLM agents and a co-designed engine.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(graph_commands.app, name="graph")
app.add_typer(data_commands.app, name="data")
app.add_typer(engine_commands.app, name="engine")
system_commands.register(app)
eval_commands.register(app)
serve_commands.register(app)
mcp_commands.register(app)
mini_commands.register(app)


def main() -> None:
    from glmcot.offline import stay_offline

    stay_offline()
    app()


if __name__ == "__main__":
    main()
