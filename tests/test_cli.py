from typer.testing import CliRunner

from glmcot.cli import app


def test_help_lists_command_groups():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for group in ("graph", "data", "engine"):
        assert group in result.output
