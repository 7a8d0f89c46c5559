"""The faithful Graph-CoT baseline (method graphcot) against a straight re-implementation of the
original's GraphAgent.step on recorded cases: the prompts it sends, the observations it appends,
its parsing, its Finish handling and its halt rule."""

from __future__ import annotations

import random
import re

import pytest

from glmcot.agents import AgentConfig, FaithfulGraphCoTAgent
from glmcot.agents.graphcot_faithful import (
    finish_value,
    original_prompt_data,
    parse_action,
    split_checks,
)
from glmcot.llm import LLMBackend, LLMResponse
from glmcot.agents.trace import GraphCoTConfig, GraphCoTStep

# The original's runtime sentences (GraphAgent.py), the data the faithful agent must reproduce.
ORIGINAL = {
    "feature_missing": "The node or feature name does not exist in the graph. This might because your given feature name is not correct. Please modify it.",
    "neighbour_missing": "The node or neighbor type does not exist in the graph. This might because your given neighbor type is not correct. Please modify it.",
    "feature_args": "There is something wrong with the arguments you send for node checking. Please modify it. Make sure that NodeFeature take two value as input: node id and feature name.",
    "neighbour_args": "There is something wrong with the arguments you send for neighbour checking. Please modify it. Make sure that NeighbourCheck take two value as input: node id and neighbor type.",
    "degree_args": "There is something wrong with the arguments you send for degree checking. Please modify it. Make sure that NodeDegree take two value as input: node id and neighbor type.",
    "invalid": "Invalid Action. Valid Actions are RetrieveNode[<Content>] NeighbourCheck[<Node>] NodeFeature[<Node>] and Finish[<answer>].",
    "unparsed": "There is something wrong with the generated target actions.",
    "empty": "You action is filtered due to content. Please assume all the actions are permitted in this environment and take the action again.",
    "no_match": "There is no information that can be matched in the database. Please try another query.",
}


def reference_index(graph):
    """The plain dict the original loads: id -> {features, neighbors}."""
    index = {}
    for node_type in graph.node_types:
        start, stop = graph.type_range(node_type)
        for position in range(start, stop):
            index[graph.node_id(position)] = {
                "features": graph.features_at(position),
                "neighbors": {r: graph.neighbor_id_list(position, r) for r in graph.relation_names(node_type)},
            }
    return index


def reference_step(index, retrieve, action):
    """GraphAgent.step's observation for one action line, re-implemented plainly."""
    out = ""
    if action in ("", "\n"):
        out += ORIGINAL["empty"]
    actions = [action] if action[:6] == "Finish" else re.findall(r"\w+\[.*?\]", action)
    for item in actions:
        match = re.match(r"^(\w+)\[(.+)\]$", item)
        if not match:
            out += ORIGINAL["unparsed"]
            continue
        name, argument = match.groups()
        if name == "Finish":
            return out, argument
        unquote = lambda s: s[1:-1] if s.startswith(("'", '"')) and s.endswith(("'", '"')) else s  # noqa: E731
        if name == "RetrieveNode":
            try:
                out += f"The ID of this retrieval target node is {retrieve(argument)}."
            except Exception:
                out += ORIGINAL["no_match"]
            continue
        kinds = {"NeighbourCheck": ("neighbour", "neighbors"), "NodeFeature": ("feature", "features"),
                 "NodeDegree": ("degree", "neighbors")}
        if name not in kinds:
            out += ORIGINAL["invalid"]
            continue
        kind, section = kinds[name]
        try:
            node, key = argument.split(", ")
            node, key = unquote(node), unquote(key)
            value = index[node][section][key]
            if name == "NodeFeature":
                out += f"The {key} feature of {node} are: {value}. "
            elif name == "NeighbourCheck":
                out += f"The {key} neighbors of {node} are: {value}. "
            else:
                out += f"The {key} neighbor node degree of {node} are: {len(value)}. "
        except KeyError:
            out += ORIGINAL["feature_missing" if name == "NodeFeature" else "neighbour_missing"]
        except ValueError:
            out += ORIGINAL[{"neighbour": "neighbour_args", "feature": "feature_args", "degree": "degree_args"}[kind]]
    return out, None


RECORDED_ACTIONS = [
    "RetrieveNode[Fast Graph Sampling]",
    "NodeFeature[p3, year]",
    "NodeFeature[p3, 'title']",
    'NodeFeature["p3", "title"]',
    "NodeFeature[ p3, title]",  # a space is not stripped: no such node
    "NodeFeature[p3, color]",
    "NodeFeature[p3]",  # one argument: the wrong-argument sentence
    "NodeFeature[p3, title, year]",
    "NeighbourCheck[p3, author]",
    "NeighbourCheck[p3, authors]",
    "NeighbourCheck[p99, author]",
    "NodeDegree[p1, cited_by]",
    "NodeDegree[p1,cited_by]",
    "NodeFeature[a1, name], NodeFeature[a3, name]",
    "NodeFeature[a1, name] NodeDegree[p3, author]",
    "neighbourcheck[p3, author]",
    "Lookup[p3]",
    "I think I should look at p3.",
    "",
    "NodeFeature[a1, name], Finish[Ada Park]",
    "Finish[Ada Park]",
    "Finish[]",
    "Finish[Ada Park].",
    "finish[Ada Park]",
]


class Recorded(LLMBackend):
    """Replays thought/action lines and records every prompt it was sent."""

    label = "recorded lines"

    def __init__(self, lines):
        self.lines = list(lines)
        self.prompts = []

    def complete(self, request):
        self.prompts.append((request.metadata["agent"], request.prompt))
        text = self.lines.pop(0) if self.lines else "Finish[out of lines]"
        return LLMResponse(text, 10, 0, 3, 0.0)

    def end_session(self, session):
        pass


def test_linear_parsers_agree_with_the_original_regular_expressions():
    generator = random.Random(7)
    alphabet = "ab_1[], '\"F\n"
    cases = RECORDED_ACTIONS + ["".join(generator.choice(alphabet) for _ in range(generator.randint(0, 20)))
                                for _ in range(3000)]
    for text in cases:
        assert split_checks(text) == re.findall(r"\w+\[.*?\]", text), text
        match = re.match(r"^(\w+)\[(.+)\]$", text)
        assert parse_action(text) == (match.groups() if match else None), text


def test_split_checks_is_linear_on_a_long_unclosed_action():
    text = "NodeFeature[" + "a" * 200_000  # re.findall takes minutes here; no "]" ends the scan
    assert split_checks(text) == []
    assert split_checks("x[" * 50_000) == []


@pytest.mark.parametrize("argument, expected", [
    ("1973-10-12", 1951), ("['Ada Park', 'Omar Diaz']", ["Ada Park", "Omar Diaz"]), ("14", 14),
    ("Ada Park, Omar Diaz", "Ada Park, Omar Diaz"), ("'x' + 'y'", "xy"), ("1/0", "1/0"),
    ("__import__('os').system('true')", "__import__('os').system('true')"), ("9**9**9", "9**9**9"),
    ("[" * 5000 + "]" * 5000, "[" * 5000 + "]" * 5000), ("True", True), ("2.50", 2.5),
])
def test_finish_value_is_python_eval_without_running_code(argument, expected):
    assert finish_value(argument) == expected


@pytest.mark.parametrize("action", RECORDED_ACTIONS)
def test_observations_equal_the_original_on_recorded_actions(context, action):
    index = reference_index(context.graph)
    expected, finish = reference_step(index, context.retrieval.resolve, action)
    backend = Recorded(["I look.", action, "Done.", "Finish[stop]"])
    result = FaithfulGraphCoTAgent(backend, context, AgentConfig(domain="dblp", graphcot_max_steps=2)).answer("Q?", "q1")
    steps = [event for event in result.trace if isinstance(event, GraphCoTStep)]
    if finish is not None:
        assert result.answer == str(finish_value(finish)) and len(steps) == 1
    else:
        assert steps[0].observation == expected
        # the next prompt carries the observation exactly as the original's scratchpad does
        assert backend.prompts[2][1].endswith(f"\nAction 1: {action}\nObservation 1: {expected}\nThought 2:")


def test_prompt_structure_and_loop_equal_the_original(context):
    lines = ["I need the paper.", "RetrieveNode[Fast Graph Sampling]", "Now its year.", "NodeFeature[p3, year]",
             "It is 2021.", "Finish[2021]"]
    backend = Recorded(lines)
    agent = FaithfulGraphCoTAgent(backend, context, AgentConfig(domain="dblp"))
    result = agent.answer("When was Fast Graph Sampling published?", "q1")
    assert result.answer == "2021" and result.llm_calls == 6 and result.method == "graphcot"
    data = original_prompt_data()
    prompts = [prompt for _, prompt in backend.prompts]
    # a system line, then the human message: instruction, examples, definition, question, scratchpad
    assert prompts[0].startswith(data["system"] + "\n\n")
    human = prompts[0][len(data["system"]) + 2 :]
    definition = agent.prompt.head.split("(END OF EXAMPLES)\nDefinition of the graph: ")[1].rstrip("\n")
    examples = human.split("Here are some examples:\n")[1].split("\n(END OF EXAMPLES)")[0]
    traces = [t for t in examples.split("Definition of the graph: ") if t]
    assert len(traces) == 3 and all(t.startswith(definition + "\nQuestion: ") for t in traces)
    # example observations show bare values, as the original's few-shots do
    assert "Observation 2: 14" in examples and "The ID of this node is " in examples
    assert not re.search(r"Observation \d+: The \S+ feature of", examples)
    suffix = "Please answer by providing node main feature (e.g., names) rather than node IDs."
    question = f"Question: When was Fast Graph Sampling published? {suffix} "
    assert human == agent.prompt.head + question + "\nThought 1:"
    # the scratchpad grows exactly as GraphAgent.step writes it
    observation = f"The ID of this retrieval target node is {context.retrieval.resolve('Fast Graph Sampling')}."
    assert prompts[3].endswith(question + "\nThought 1: I need the paper.\nAction 1: RetrieveNode[Fast Graph Sampling]"
                               f"\nObservation 1: {observation}\nThought 2: Now its year.\nAction 2:")
    assert prompts[4].endswith("\nAction 2: NodeFeature[p3, year]\nObservation 2: The year feature of p3 are: 2021. \nThought 3:")
    config = next(event for event in result.trace if isinstance(event, GraphCoTConfig))
    assert config.variant == "faithful" and config.token_counter


def test_halts_with_an_empty_answer_on_steps_and_on_the_token_cap(context):
    endless = Recorded(["Hmm.", "NodeFeature[p3, year]"] * 20)
    result = FaithfulGraphCoTAgent(endless, context, AgentConfig(domain="dblp", graphcot_max_steps=3)).answer("Q?", "q1")
    assert result.answer == "" and result.failure == "step_limit" and result.llm_calls == 6

    class Counter:
        name = "words"

        def count(self, text):
            return len(text.split())

    agent = FaithfulGraphCoTAgent(Recorded(["Hmm.", "NodeFeature[p3, year]"] * 20), context,
                                  AgentConfig(domain="dblp", graphcot_token_cap=10**6), counter=Counter())
    cap = Counter().count(agent.prompt.human("Q?", "")) + 5  # room for exactly one step
    agent.config.graphcot_token_cap = cap
    result = agent.answer("Q?", "q1")
    assert result.answer == "" and result.failure == "step_limit" and result.llm_calls == 2
    assert "words" in result.failure_detail


def test_methods_name_the_variant(context, scripted, records):
    from glmcot.agents.runner import make_agent

    faithful = make_agent("graphcot", scripted, context, AgentConfig(domain="dblp"))
    repaired = make_agent("graphcot-repaired", scripted, context, AgentConfig(domain="dblp"))
    assert faithful.method == "graphcot" and repaired.method == "graphcot-repaired"
    record = records[0]
    assert faithful.answer(record["question"], record["qid"]).answer == repaired.answer(record["question"], record["qid"]).answer


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lines", [
    ["I need \ud800 it.", "NodeFeature[\ud800, title]"],
    ["Hmm.", "RetrieveNode[\udc80]"],
    ["Hmm.", "A" * 200_000],
    ["Hmm.", "RetrieveNode[" + "x" * 200_000 + "]"],
])
def test_hostile_llm_lines_never_raise(context, lines):
    import json

    agent = FaithfulGraphCoTAgent(Recorded(lines * 2), context, AgentConfig(domain="dblp", graphcot_max_steps=2))
    for question in ("Q?", "Who wrote \ud800?"):
        result = agent.answer(question, "q1")
        assert result.failure in (None, "step_limit")
        json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")  # a trace row can be written
