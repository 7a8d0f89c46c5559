import pytest

from glmcot.agents import formats
from glmcot.agents.formats import Action, FormatError


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


# ---- linear in the reply's length ---------------------------------------------------------------
# Each of these took seconds to minutes with the old regular expressions (quadratic
# backtracking); the timeout is a hang guard only, the assertions are on the results.

BIG = 200_000


@pytest.mark.timeout(60)
def test_parse_actions_on_long_replies():
    assert formats.parse_actions("A" * BIG) == []
    assert formats.parse_actions("RetrieveNode[" + "x" * BIG) == [Action("RetrieveNode", "x" * BIG)]
    assert formats.parse_actions("Action" + " " * BIG + "x") == []  # not a label: no colon
    assert formats.parse_actions("Action 1:" + " " * BIG + "Finish[yes]") == [Action("Finish", "yes")]
    long_call = "NodeFeature[p1, " + "t" * BIG + "]"
    assert formats.parse_actions(long_call) == [Action("NodeFeature", "p1, " + "t" * BIG)]
    many = ", ".join(["NodeDegree[p1, author]"] * 8000)
    assert formats.parse_actions(many) == [Action("NodeDegree", "p1, author")] * 8000
    assert formats.clean_step_text("x Thought" + " " * BIG + "y", "Action", 1) == "x Thought" + " " * BIG + "y"
    assert formats.clean_step_text("go Thought " + "7" * BIG + ": stop", "Action", 1) == "go"


@pytest.mark.timeout(60)
def test_parse_reasoning_on_long_replies():
    with pytest.raises(FormatError):
        formats.parse_reasoning("\n" * BIG)
    assert formats.parse_reasoning("\n" * BIG + "Answer: 42") == formats.Reasoning(answer="42")
    assert formats.parse_reasoning("<answer>a" + " " * BIG + "b") == formats.Reasoning(answer="a" + " " * BIG + "b")
    assert formats.parse_reasoning("<missing>" + "\n" * BIG + "x</missing>") == formats.Reasoning(missing="x")
    assert formats.parse_first_missing("<missing>a" + " " * BIG + "b") == "a" + " " * BIG + "b"
    assert formats.parse_reasoning("missing" + " " * BIG + ": the year") == formats.Reasoning(missing="the year")


@pytest.mark.timeout(60)
def test_parse_code_and_facts_on_long_replies():
    with pytest.raises(FormatError):
        formats.parse_code("```" + " " * BIG + "x")
    assert formats.parse_code("```" + " " * BIG + "\nprint(1)\n```") == "print(1)"
    assert formats.parse_fact('<fact n="1">\nNeeded: ' + "\nFound:\n" * (BIG // 8)) is None
    fact = formats.render_fact(3, "the year", "2019")
    assert formats.parse_fact("\nFound:\n" * 1000 + fact) == (3, "the year", "2019")


def test_linear_parsers_agree_with_the_original_expressions():
    """The rewritten parsers return what the original (quadratic) regular expressions did, on
    random strings built from the pieces that matter."""
    import random
    import re

    old_tag = re.compile(r"<(answer|missing)>\s*(.*?)\s*(?:</\1>|<(?:answer|missing)>|$)", re.DOTALL | re.IGNORECASE)
    old_plain = re.compile(r"^\s*(?:final\s+)?(answer|missing(?:\s+information)?)\s*[:：]\s*(.+)", re.IGNORECASE | re.MULTILINE)
    old_call = re.compile(r"(\w+)\[(.*?)\]")

    def old_clean(text, kind):
        body = formats.strip_thinking(text).strip()
        body = re.sub(rf"^\s*{kind}\s*\d*\s*:\s*", "", body, flags=re.IGNORECASE)
        other = "Action" if kind == "Thought" else "Observation|Thought"
        body = re.split(rf"\b(?:{other})\s*\d*\s*:", body, maxsplit=1)[0]
        return body.strip().splitlines()[0].strip() if body.strip() else ""

    pieces = ["<answer>", "</answer>", "<missing>", "</Missing>", "Answer", "answer:", "Final ", "missing information",
              ":", "：", " ", "\n", "x", "y1", "[", "]", "A[", "Action", "Action 2:", "Thought", "Thought 3 :",
              "Observation:", "_", "é", "\t", "3", "Finish[", "finish"]
    generator = random.Random(7)
    for _ in range(5000):
        text = "".join(generator.choice(pieces) for _ in range(generator.randint(0, 12)))
        assert [(k, v.strip()) for k, v in old_tag.findall(text)] == [(k, v.strip()) for k, v in formats._TAG.findall(text)], text
        assert [(k, v.strip()) for k, v in old_plain.findall(text)] == [(k, v.strip()) for k, v in formats._PLAIN.findall(text)], text
        assert old_call.findall(text) == formats._bracket_calls(text), text
        for kind in ("Action", "Thought"):
            assert old_clean(text, kind) == formats.clean_step_text(text, kind, 0), text


def _split(pieces):
    from glmcot.llm.types import LineSplitter

    lines = []
    splitter = LineSplitter(None, lines.append)
    for piece in pieces:
        splitter.feed(piece)
    splitter.finish()
    return lines


def test_line_splitter_gives_each_line_once():
    import random

    assert _split(["ab", "c\nd", "e\n\nf", "\n"]) == ["abc", "de", "", "f"]
    assert _split(["x"]) == ["x"] and _split(["x\n"]) == ["x"] and _split([]) == []
    generator = random.Random(3)
    for _ in range(2000):
        text = "".join(generator.choice(["a", "b", "\n", "cd"]) for _ in range(generator.randint(0, 30)))
        cuts = sorted(generator.sample(range(len(text) + 1), min(len(text) + 1, generator.randint(0, 6))))
        pieces = [text[i:j] for i, j in zip([0] + cuts, cuts + [len(text)])]
        expected = text.split("\n")
        if expected and expected[-1] == "":
            expected.pop()
        assert _split(pieces) == expected, pieces


@pytest.mark.timeout(60)
def test_line_splitter_is_linear_on_long_replies():
    # One 200k-character reply of blank lines (each line used to copy the rest of the buffer), and
    # a 200k-piece stream of one long line (each piece used to re-scan and copy the buffer).
    assert _split(["\n" * BIG + "x"]) == [""] * BIG + ["x"]
    assert _split(["ab"] * BIG) == ["ab" * BIG]
