from typer.testing import CliRunner

from glmcot.cli import app


def test_help_lists_command_groups():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for group in ("graph", "data", "engine"):
        assert group in result.output


def test_help_texts_show_their_bracketed_notes():
    """[env ...] and [default ...] notes are text, not console markup that vanishes (leaving ' .')."""
    result = CliRunner().invoke(app, ["ask", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "[env GLMCOT_LLM_MODEL]" in result.output and " ." not in result.output


def test_graph_info_accepts_the_dataset_folder_data_synth_writes(tmp_path):
    from glmcot.data.synth import SynthConfig, generate

    generate(SynthConfig(domain="dblp", scale="tiny", seed=0, questions_per_template=1), tmp_path / "dblp")
    result = CliRunner().invoke(app, ["graph", "info", str(tmp_path / "dblp"), "--json"])
    assert result.exit_code == 0, result.output
    assert '"nodes"' in result.output
