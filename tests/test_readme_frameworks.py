"""README, "Use it from your agent framework": every snippet runs as written against a real
`glmcot serve` started by the section's own command (keys file, MCP host configuration, LangChain,
LlamaIndex, the OpenAI client), on the synthetic dblp graph under the scripted policy (a system
check, never model accuracy). Only the port differs: the test picks a free one."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.integrations.conftest import child_env, free_port, start, stop

README = Path(__file__).resolve().parents[1] / "README.md"
DEFAULT_URL = "http://127.0.0.1:8000"


def section() -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"\n## Use it from your agent framework\n(.*?)\n## ", text, re.S)
    assert found, "README has no 'Use it from your agent framework' section"
    return found.group(1)


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(), re.S)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    from glmcot.data.synth import SynthConfig, generate

    root = tmp_path_factory.mktemp("readme-frameworks")
    generate(SynthConfig(domain="dblp", scale="tiny", seed=0, questions_per_template=1), root / "dblp")
    keys, _ = blocks("json")
    (root / "keys.json").write_text(keys)
    return root


@pytest.fixture(scope="module")
def server(workdir):
    (command,) = [line for line in blocks("bash")[0].splitlines() if line.startswith("glmcot serve ")]
    args = shlex.split(command.split("#")[0])[1:]
    assert "synth" in blocks("bash")[0]   # the graph the commands name is the one generated above
    # run where a user would: the section's paths are relative to the folder holding dblp/
    process, url = start(args, free_port(), cwd=workdir)
    yield url
    stop(process)


def gold(workdir: Path) -> tuple[str, str]:
    from glmcot.data.questions import read_questions

    record = read_questions(workdir / "dblp" / "questions.jsonl")[0]
    return record.question, record.answer


def run_python(code: str, url: str, cwd: Path) -> list[str]:
    assert DEFAULT_URL in code
    result = subprocess.run([sys.executable, "-c", code.replace(DEFAULT_URL, url)], cwd=cwd, env=child_env(),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


def test_keys_block_is_a_valid_keys_file(workdir):
    from glmcot.serve.keys import read_keys

    grants = {grant.name: grant for grant in read_keys(workdir / "keys.json").values()}
    assert grants["analyst"].graphs == frozenset({"dblp"}) and not grants["analyst"].update
    assert grants["ops"].admin and grants["ops"].update


@pytest.mark.parametrize("position", [0, 1], ids=["langchain", "llamaindex"])
def test_framework_snippets(server, workdir, position):
    _, answer = gold(workdir)
    lines = run_python(blocks("python")[position], server, workdir)
    documents = [line for line in lines if line.startswith("document ")]
    assert documents and all(len(line.split()) == 3 for line in documents)
    (answered,) = [line for line in lines if line.startswith("answer ")]
    assert answered.startswith(f"answer {answer} [")


def test_chat_snippet(server, workdir):
    _, answer = gold(workdir)
    lines = run_python(blocks("python")[2], server, workdir)
    assert "'glm/dblp'" in lines[0] and "'graphcot/dblp'" in lines[0]
    assert any(line.startswith("step ") for line in lines)
    assert "".join(line[len("answer "):] for line in lines if line.startswith("answer ")) == answer
    (usage,) = [line for line in lines if line.startswith("usage ")]
    assert int(usage.split()[1]) > 0


def test_mcp_host_configuration(workdir):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    question, answer = gold(workdir)
    entry = json.loads(blocks("json")[1])["mcpServers"]["glmcot"]
    assert entry["command"] == "glmcot"
    args = [arg.replace("/path/to/", f"{workdir}/") for arg in entry["args"]]
    params = StdioServerParameters(command=sys.executable, args=["-m", "glmcot.cli", *args], env=child_env())

    async def scenario():
        async with Client(params, read_timeout_seconds=300) as client:
            result = await client.call_tool("ask_graph", {"question": question, "graph": "dblp"})
            assert not result.is_error, result.content
            assert result.structured_content["answer"] == answer

    anyio.run(scenario)
