"""The README's Python API example runs as written (on the synthetic dblp graph it names)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_python_api_example_runs(tmp_path):
    from glmcot.data.synth import SynthConfig, generate

    example = re.search(r"## Python API\n\n```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert example, "README has no Python API example"
    generate(SynthConfig(domain="dblp", scale="tiny", seed=0, questions_per_template=1), tmp_path / "dblp")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-c", example.group(1)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    from glmcot.data.questions import read_questions

    gold = read_questions(tmp_path / "dblp" / "questions.jsonl")[0].answer
    assert lines[0].startswith(gold + " "), (gold, lines[0])  # the scripted policy follows the gold plan
    assert any(line.startswith("LLM ") for line in lines)
    assert any(line.startswith("snippet ") and "RetrieveNode(" in line for line in lines)
