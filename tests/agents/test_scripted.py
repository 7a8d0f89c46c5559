import pytest

from glmcot.agents import formats
from glmcot.llm import LLMError, LLMRequest, Segment
from glmcot.agents.scripted import SCRIPTED_LABEL, ScriptedBackend

RECORD = {
    "qid": "q1",
    "question": "Who wrote X?",
    "deterministic": False,
    "plan": {
        "glm": [
            {"missing": "the authors of X", "code": 'print("A1, A2")'},
            {"missing": "their names", "code": 'print("Ada, Omar")'},
        ],
        "graphcot": [
            {"thought": "Find X.", "action": "RetrieveNode[X]"},
            {"thought": "Authors.", "action": "NeighbourCheck[$0, author]"},
            {"thought": "Names.", "action": "NodeFeature[$1[*], name]"},
            {"thought": "Done.", "action": "Finish[$answer]"},
        ],
    },
}


def request(agent, step=0, segments=None, stop=(), session="s1", on_line=None):
    return LLMRequest(
        segments=segments or [Segment("prompt\n", 1)],
        stop=list(stop),
        session=session,
        metadata={"qid": "q1", "agent": agent, "step": step, "attempt": 0},
        on_line=on_line,
    )


@pytest.fixture
def backend():
    return ScriptedBackend([RECORD], code_runner=lambda code: "Ada, Omar\n")


def test_label_follows_plan(backend):
    response = backend.complete(request("classify", stop=formats.CLASSIFY_STOP))
    assert response.text == "<label>non-deterministic"  # the stop string is cut, as servers do
    assert formats.parse_label(response.text) is False
    assert response.backend == SCRIPTED_LABEL
    assert response.prompt_tokens > 0 and response.output_tokens > 0


def test_reason_walks_the_plan_then_answers_from_the_notebook(backend):
    first = backend.complete(request("reason", 0, stop=formats.REASON_STOP))
    assert formats.parse_reasoning(first.text).missing == "the authors of X"
    notebook = [
        Segment("R prompt\n", 1),
        Segment(formats.render_fact(1, "the authors of X", "A1, A2"), 2),
        Segment("[node a1 | author]\nname: Ada\n", 2, "vertex:a1"),
        Segment(formats.render_fact(2, "their names", "Ada, Omar (from the graph)"), 2),
        Segment("Question: Who wrote X?\n", 4),
    ]
    final = backend.complete(request("reason", 2, segments=notebook, stop=formats.REASON_STOP))
    # The answer is whatever the last fact says: a retrieval miss would show up here.
    assert formats.parse_reasoning(final.text).answer == "Ada, Omar (from the graph)"


def test_act_emits_the_step_code_and_streams_lines(backend):
    lines = []
    response = backend.complete(request("act", 1, stop=formats.ACT_STOP, on_line=lines.append))
    assert formats.parse_code(response.text) == 'print("Ada, Omar")'
    assert lines == ["<code>", 'print("Ada, Omar")']


def test_graphcot_fills_ids_from_observations(backend):
    head = Segment("Graph-CoT prompt with Observation 1: example\n", 1)
    body = "Question: Who wrote X?"
    out = backend.complete(request("graphcot-action", 0, segments=[head, Segment(body + "\nAction 1:", 2)]))
    assert out.text == "RetrieveNode[X]"
    body += "\nAction 1: RetrieveNode[X]\nObservation 1: The ID of this retrieval target node is p7."
    out = backend.complete(request("graphcot-action", 1, segments=[head, Segment(body + "\nThought 2: a\nAction 2:", 2)]))
    assert out.text == "NeighbourCheck[p7, author]"
    body += "\nThought 2: a\nAction 2: NeighbourCheck[p7, author]\nObservation 2: The author neighbors of p7 are: ['a1', 'a2']. "
    out = backend.complete(request("graphcot-action", 2, segments=[head, Segment(body + "\nAction 3:", 2)]))
    assert out.text == "NodeFeature[a1, name], NodeFeature[a2, name]"
    out = backend.complete(request("graphcot-action", 3, segments=[head, Segment(body + "\nAction 4:", 2)]))
    assert out.text == "Finish[Ada, Omar]"
    thought = backend.complete(request("graphcot-thought", 3, segments=[head, Segment(body + "\nThought 4:", 2)]))
    assert thought.text == "Done."


def test_finish_value_of_a_previous_action(backend):
    record = dict(RECORD, qid="q2", plan=dict(RECORD["plan"], graphcot=[
        {"thought": "t", "action": "RetrieveNode[X]"},
        {"thought": "t", "action": "NodeDegree[$0, cited_by]"},
        {"thought": "t", "action": "Finish[$1]"},
    ]))
    scripted = ScriptedBackend([record])
    body = "Question: q"
    meta = lambda step: {"qid": "q2", "agent": "graphcot-action", "step": step}
    scripted.complete(LLMRequest([Segment(body, 2)], session="s", metadata=meta(0)))
    body += "\nAction 1: RetrieveNode[X]\nObservation 1: The ID of this retrieval target node is p1."
    assert scripted.complete(LLMRequest([Segment(body, 2)], session="s", metadata=meta(1))).text == "NodeDegree[p1, cited_by]"
    body += "\nAction 2: NodeDegree[p1, cited_by]\nObservation 2: The cited_by neighbor node degree of p1 are: 3. "
    assert scripted.complete(LLMRequest([Segment(body, 2)], session="s", metadata=meta(2))).text == "Finish[3]"


def test_unknown_question_is_a_clear_error(backend):
    with pytest.raises(LLMError, match="no known question"):
        backend.complete(LLMRequest([Segment("x", 4)], metadata={"qid": "nope", "agent": "act"}))


def test_answer_needs_a_code_runner():
    scripted = ScriptedBackend([RECORD])
    with pytest.raises(LLMError, match="code runner"):
        scripted.complete(request("graphcot-action", 3))


def test_forced_decoding_goes_to_the_inner_backend():
    seen = []

    class Inner:
        label = "native test"

        def complete(self, req):
            seen.append(req.forced_text)
            from glmcot.llm import LLMResponse

            return LLMResponse(req.forced_text, 10, 4, 3, 0.1)

        def end_session(self, session):
            seen.append(("end", session))

        def close(self):
            pass

    scripted = ScriptedBackend([RECORD], inner=Inner())
    response = scripted.complete(request("act", 0, stop=formats.ACT_STOP))
    assert seen[0] == '<code>\nprint("A1, A2")\n'
    assert response.backend == "scripted policy on native test"
    assert response.cached_tokens == 4
    scripted.end_session("s1")
    assert seen[-1] == ("end", "s1")


def test_max_tokens_cuts_the_output_like_a_server():
    scripted = ScriptedBackend([RECORD])
    response = scripted.complete(LLMRequest([Segment("p", 4)], max_tokens=3, metadata={"qid": "q1", "agent": "act", "step": 0}))
    assert response.finish_reason == "length"
    assert response.output_tokens == 3
    assert response.text == formats.render_code('print("A1, A2")')[: len(response.text)]
