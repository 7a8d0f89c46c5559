"""Error paths: a fuzzing scripted backend (garbage, wrong ids, code that raises, loops, imports,
escapes) ends in retries or recorded failures; nothing crashes or hangs."""

import time

import pytest

from glmcot.agents import AgentConfig, GLMAgent, GraphCoTAgent
from glmcot.agents import formats
from glmcot.llm import LLMBackend, LLMError, LLMResponse


class Fuzz(LLMBackend):
    """Answers calls of `agent` on attempts listed in `bad` with `text`; the rest come from the
    scripted policy."""

    label = "fuzzing scripted policy"

    def __init__(self, inner, agent, text, bad=None):
        self.inner, self.agent, self.text, self.bad = inner, agent, text, bad
        self.seen = []

    def complete(self, request):
        meta = request.metadata
        self.seen.append((meta["agent"], meta.get("step"), meta.get("attempt"), request.prompt))
        if meta["agent"] == self.agent and (self.bad is None or meta.get("attempt", 0) in self.bad):
            text = self.text(meta) if callable(self.text) else self.text
            if isinstance(text, Exception):
                raise text
            return LLMResponse(text, 10, 0, 5, 0.0)
        return self.inner.complete(request)

    def end_session(self, session):
        self.inner.end_session(session)


BAD_SNIPPETS = {
    "garbage": ("!!! ??? <<>>", "unexpected_output"),
    "prose": ("I am not sure how to do that.", "unexpected_output"),
    "wrong_id": ('<code>\nprint(NodeFeature("p999", "title"))\n</code>', "retrieval_error"),
    "wrong_relation": ('<code>\nprint(NeighbourCheck("p1", "authors"))\n</code>', "retrieval_error"),
    "raises": ("<code>\nx = [1]\nprint(x[3])\n</code>", "code_error"),
    "loops_forever": ("<code>\nn = 0\nfor i in range(10**12):\n    n += 1\n</code>", "code_error"),
    "imports": ("<code>\nimport os\nprint(os.getcwd())\n</code>", "code_error"),
    "escapes": ("<code>\nprint(().__class__.__bases__[0].__subclasses__())\n</code>", "code_error"),
    "prints_nothing": ("<code>\nx = 1\n</code>", "code_error"),
    # Deep nesting under the size cap (RecursionError/MemoryError in the parent before).
    "deep_not": ("<code>\nx = " + "not " * 1900 + "1\n</code>", "code_error"),
    "deep_minus": ("<code>\n" + "-" * 7000 + "1\n</code>", "code_error"),
    "deep_plus": ("<code>\nx = " + "+".join(["1"] * 3900) + "\n</code>", "code_error"),
    "deep_strip": ('<code>\nx = "a"' + ".strip()" * 900 + "\n</code>", "code_error"),
    # No tag: parse_code tries the whole reply as Python.
    "deep_untagged": ("-" * 7000 + "1", "unexpected_output"),
}


@pytest.mark.parametrize("name", sorted(BAD_SNIPPETS))
def test_bad_snippets_are_retried_then_recorded(context, scripted, records, name):
    text, category = BAD_SNIPPETS[name]
    fuzz = Fuzz(scripted, "act", text)
    config = AgentConfig(domain="dblp", max_code_retries=1)
    started = time.perf_counter()
    result = GLMAgent(fuzz, context, config).answer(records[0]["question"], qid="t-0")
    assert time.perf_counter() - started < 20
    assert result.answer == ""
    assert result.failure == category, result.failure_detail
    attempts = [s for s in fuzz.seen if s[0] == "act"]
    assert len(attempts) == 2  # the first try and one retry
    # The retry prompt carries the failed snippet and the error.
    assert "failed:" in attempts[1][3]


def test_a_failed_snippet_is_corrected_on_retry(context, scripted, records):
    text, _ = BAD_SNIPPETS["wrong_id"]
    fuzz = Fuzz(scripted, "act", text, bad={0})
    result = GLMAgent(fuzz, context, AgentConfig(domain="dblp")).answer(records[0]["question"], qid="t-0")
    assert result.failure is None
    assert result.answer == records[0]["answer"]
    retry_prompt = [s for s in fuzz.seen if s[0] == "act"][1][3]
    assert "no such node" in retry_prompt and "p999" in retry_prompt


def test_garbage_reasoning_is_asked_again_then_fails(context, scripted, records):
    record = records[2]
    fuzz = Fuzz(scripted, "reason", "blah blah")
    result = GLMAgent(fuzz, context, AgentConfig(domain="dblp", max_format_retries=1)).answer(record["question"], record["qid"])
    assert result.failure == "unexpected_output"
    assert [s[2] for s in fuzz.seen if s[0] == "reason"] == [0, 1]


def test_garbage_label_falls_back_to_the_general_path(context, scripted, records):
    fuzz = Fuzz(scripted, "classify", "?!")
    result = GLMAgent(fuzz, context, AgentConfig(domain="dblp")).answer(records[0]["question"], "t-0")
    assert result.deterministic is False
    assert result.failure is None and result.answer == records[0]["answer"]


def test_endless_missing_information_hits_the_step_limit(context, scripted, records):
    fuzz = Fuzz(scripted, "reason", formats.render_missing('the authors of "Fast Graph Sampling"'))
    config = AgentConfig(domain="dblp", max_rounds=2, plan_in_classify=False)
    result = GLMAgent(fuzz, context, config).answer(records[2]["question"], records[2]["qid"])
    assert result.failure == "step_limit"
    assert result.calls_by_agent["reason"] == 3 and result.calls_by_agent["act"] == 2


def test_backend_errors_are_recorded(context, scripted, records):
    fuzz = Fuzz(scripted, "act", LLMError("server down"))
    result = GLMAgent(fuzz, context).answer(records[0]["question"], "t-0")
    assert result.failure == "backend_error" and "server down" in result.failure_detail


@pytest.mark.parametrize("text", ["", "Finish", "NodeFeature[p1]", "Bogus[1, 2]", "RetrieveNode[", "NeighbourCheck[p999, author]"])
def test_graphcot_garbage_ends_in_step_limit(context, scripted, records, text):
    fuzz = Fuzz(scripted, "graphcot-action", text)
    result = GraphCoTAgent(fuzz, context, AgentConfig(domain="dblp", graphcot_max_steps=3)).answer(records[0]["question"], "t-0")
    assert result.failure == "step_limit"
    assert result.answer == ""
    assert result.llm_calls == 6


def test_graphcot_token_cap(context, scripted, records):
    result = GraphCoTAgent(scripted, context, AgentConfig(domain="dblp", graphcot_token_cap=100)).answer(records[0]["question"], "t-0")
    assert result.failure == "step_limit" and "tokens" in result.failure_detail
    assert result.llm_calls == 0


def test_unexpected_backend_exceptions_become_backend_errors(context, scripted, records):
    fuzz = Fuzz(scripted, "classify", ValueError("prompt too long for the KV pool"))
    for agent in (GLMAgent(fuzz, context), GraphCoTAgent(Fuzz(scripted, "graphcot-thought", ValueError("boom")), context)):
        result = agent.answer(records[0]["question"], "t-0")
        assert result.failure == "backend_error"
        assert "ValueError" in result.failure_detail


@pytest.mark.timeout(120)
def test_graphcot_survives_a_200k_character_action(context, scripted, records):
    # A quadratic action parser took minutes on this; now one step costs a linear scan.
    fuzz = Fuzz(scripted, "graphcot-action", "A" * 200_000)
    result = GraphCoTAgent(fuzz, context, AgentConfig(domain="dblp", graphcot_max_steps=2)).answer(records[0]["question"], "t-0")
    assert result.failure == "step_limit"
    assert result.answer == ""


@pytest.mark.parametrize("agent, text", [
    ("graphcot-action", "NodeFeature[\ud800, title]"),
    ("graphcot-action", "RetrieveNode[\ud800]"),
    ("graphcot-thought", "I need \udc80 the paper."),
])
def test_graphcot_lone_surrogates_in_llm_output_never_raise(context, scripted, records, agent, text):
    fuzz = Fuzz(scripted, agent, text)
    result = GraphCoTAgent(fuzz, context, AgentConfig(domain="dblp", graphcot_max_steps=2)).answer(records[0]["question"], "t-0")
    assert result.failure in (None, "step_limit")
    # Everything the agent keeps is valid text (a trace row can be written as UTF-8).
    import json

    json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")


def test_glm_lone_surrogates_become_replacement_characters(context, scripted, records):
    fuzz = Fuzz(scripted, "act", '<code>\nprint("\ud800 found")\n</code>')
    result = GLMAgent(fuzz, context, AgentConfig(domain="dblp")).answer(records[0]["question"], qid="t-0")
    assert result.failure is None
    assert result.answer == "\ufffd found"
    fuzz = Fuzz(scripted, "act", '<code>\nprint("\\ud800" + " printed")\n</code>')
    result = GLMAgent(fuzz, context, AgentConfig(domain="dblp")).answer(records[0]["question"], qid="t-0")
    assert result.failure is None and result.answer == "\ufffd printed"
    result = GLMAgent(scripted, context, AgentConfig(domain="dblp")).answer("Who wrote \ud800?", qid="t-0")
    assert "\ud800" not in result.question


def test_graphcot_lone_surrogate_in_the_question(context, scripted, records):
    result = GraphCoTAgent(scripted, context, AgentConfig(domain="dblp", graphcot_max_steps=2)).answer("Who wrote \ud800?", "t-0")
    assert "\ud800" not in result.question
    import json

    json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")
