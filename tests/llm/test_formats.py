import pytest

from glmcot.llm import formats
from glmcot.llm.formats import Action, FormatError


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<label>deterministic</label>", True),
        ("<label>non-deterministic", False),
        ("Label: deterministic", True),
        ("<think>hmm, is it deterministic?</think><label>non-deterministic</label>", False),
        ("This is a non deterministic question.", False),
        ("  deterministic\n", True),
    ],
)
def test_parse_label(text, expected):
    assert formats.parse_label(text) is expected


def test_parse_label_rejects_garbage():
    with pytest.raises(FormatError, match="expected <label>"):
        formats.parse_label("banana")


@pytest.mark.parametrize(
    "text, answer, missing",
    [
        ("<answer>Ada Park, Omar Diaz</answer>", "Ada Park, Omar Diaz", None),
        ("<answer>Ada Park", "Ada Park", None),  # the stop string removed the closing tag
        ("<missing>the venue of \"X\"", None, 'the venue of "X"'),
        ("I think...\n<missing>a</missing>\nactually <answer>b</answer>", "b", None),
        ("Answer: 42", "42", None),
        ("Missing information: the year of \"X\"", None, 'the year of "X"'),
        ("<think>long thoughts <answer>wrong</answer></think><answer>right</answer>", "right", None),
    ],
)
def test_parse_reasoning(text, answer, missing):
    decision = formats.parse_reasoning(text)
    assert decision.answer == answer
    assert decision.missing == missing


def test_parse_reasoning_rejects_empty_and_garbage():
    for text in ("", "<answer></answer>", "I don't know what to do"):
        with pytest.raises(FormatError):
            formats.parse_reasoning(text)


@pytest.mark.parametrize(
    "text",
    [
        "<code>\nx = 1\nprint(x)\n</code>",
        "<code>\nx = 1\nprint(x)\n",  # cut at the stop string
        "Here is the code:\n```python\nx = 1\nprint(x)\n```\nDone.",
        "```\nx = 1\nprint(x)\n```",
        "x = 1\nprint(x)",
        "<code>\n```python\nx = 1\nprint(x)\n```\n</code>",
        "<code>\n    x = 1\n    print(x)\n</code>",
    ],
)
def test_parse_code_variants(text):
    assert formats.parse_code(text) == "x = 1\nprint(x)"


def test_parse_code_rejects_prose():
    with pytest.raises(FormatError, match="<code>"):
        formats.parse_code("I would look up the authors first and then print them.")


def test_render_then_parse_round_trips():
    assert formats.parse_code(formats.render_code("a = 1\nprint(a)")) == "a = 1\nprint(a)"
    assert formats.parse_reasoning(formats.render_missing("m")).missing == "m"
    assert formats.parse_reasoning(formats.render_answer("x, y")).answer == "x, y"
    assert formats.parse_label(formats.render_label(False)) is False
    number, missing, output = formats.parse_fact(formats.render_fact(2, "what", "A, B\n"))
    assert (number, missing, output) == (2, "what", "A, B")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("RetrieveNode[Fast Graph Sampling]", [Action("RetrieveNode", "Fast Graph Sampling")]),
        ("NodeFeature[a1, name], NodeFeature[a2, name]", [Action("NodeFeature", "a1, name"), Action("NodeFeature", "a2, name")]),
        ("NeighbourCheck[p1, author", [Action("NeighbourCheck", "p1, author")]),  # no closing bracket
        ("Action 3: NodeDegree[p1, cited_by]", [Action("NodeDegree", "p1, cited_by")]),
        ("neighborcheck[p1, author]", [Action("NeighbourCheck", "p1, author")]),
        ("Finish[['Ada Park', 'Omar Diaz']]", [Action("Finish", "['Ada Park', 'Omar Diaz']")]),
        ("Finish[Ada Park", [Action("Finish", "Ada Park")]),
        ("I should look it up. Action 1: RetrieveNode[X]", [Action("RetrieveNode", "X")]),
        ("", []),
        ("nothing useful", []),
    ],
)
def test_parse_actions(text, expected):
    assert formats.parse_actions(text) == expected


def test_clean_step_text_handles_thought_action_confusion():
    assert formats.clean_step_text(" I need X. Action 2: RetrieveNode[X]", "Thought", 2) == "I need X."
    assert formats.clean_step_text("Thought 2: find it", "Thought", 2) == "find it"
    assert formats.clean_step_text("RetrieveNode[X]\nObservation 2: made up", "Action", 2) == "RetrieveNode[X]"
