"""The scripted Graph-CoT policy expands `$k[*]` exactly as glmcot.data's plan runner does."""

import json
import re

import pytest
from glmcot.agents.trace import GraphCoTStep


@pytest.fixture(scope="module")
def dblp(tmp_path_factory):
    from glmcot.data.synth.generate import SynthConfig, generate

    out = tmp_path_factory.mktemp("dblp")
    generate(SynthConfig(domain="dblp", scale="tiny", seed=0, questions_per_template=2), out)
    records = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    return out, records


def _star_over_expanded(record) -> bool:
    actions = [step["action"] for step in record["plan"]["graphcot"]]
    expanded = {k for k, action in enumerate(actions) if "[*]" in action}
    return any(f"${k}[*]" in action for action in actions for k in expanded)


def test_star_over_an_expanded_action_calls_each_element(dblp):
    from glmcot.agents import AgentConfig, AgentContext, GraphCoTAgent, ScriptedBackend
    from glmcot.graph.storage.store import Graph

    out, records = dblp
    chosen = [r for r in records if _star_over_expanded(r)][:3]
    assert chosen, "the generator no longer emits $k[*] over an expanded action (dblp/5 did)"
    with AgentContext(out / "graph", retriever="lexical", workers=1, domain="dblp") as context:
        backend = ScriptedBackend(chosen, code_runner=context.run_code)
        agent = GraphCoTAgent(backend, context, AgentConfig(domain="dblp"))
        graph = Graph.open(out / "graph")
        for record in chosen:
            result = agent.answer(record["question"], record["qid"])
            steps = [e for e in result.trace if isinstance(e, GraphCoTStep)]
            for step in steps:
                # A list repr inside a call's argument means the expansion inserted a whole list.
                assert not re.search(r"\[\s*'", step.action), step.action
            # Every expanded call names one existing node (a flattened element, never a list).
            # Graph-CoT's 300-token action cap may cut a long expansion short, as in the original.
            calls = [c for step in steps if not step.action.startswith("Finish")
                     for c in re.findall(r"(\w+)\[([^\]]*)\]", step.action)]
            assert len(calls) >= 3
            for name, argument in calls:
                if name != "RetrieveNode":
                    assert graph.has_node(argument.split(", ")[0]), (name, argument)
            assert result.failure is None, result.failure_detail
