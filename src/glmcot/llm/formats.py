"""Agent output formats (version glmcot.agent-formats/1): how each agent writes its answer, the
stop strings that end it, and lenient parsers for what local models actually emit.

Formats:
- C-Agent (classify): ``<label>deterministic</label>`` or ``<label>non-deterministic</label>``.
- R-Agent (reason):   ``<answer>...</answer>`` or ``<missing>...</missing>``.
- A-Agent (act):      ``<code>\n...\n</code>``.
- Graph-CoT:          a one-line thought, then one line of bracket actions
                      (``RetrieveNode[text]``, ``NeighbourCheck[id, relation]``, ``Finish[answer]``).

Servers drop the stop string from the output, so every parser accepts a missing closing tag. The
scripted policy renders through the same functions, so scripted runs exercise these parsers.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

FORMAT_VERSION = "glmcot.agent-formats/1"

CLASSIFY_STOP = ["</label>"]
CLASSIFY_PLAN_STOP = ["</missing>"]  # classify-and-plan: the label may be followed by <missing>
REASON_STOP = ["</answer>", "</missing>"]
ACT_STOP = ["</code>"]
GRAPHCOT_STOP = ["\n"]

DETERMINISTIC = "deterministic"
NON_DETERMINISTIC = "non-deterministic"

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)


class FormatError(ValueError):
    """The output does not follow the agent's format (the message says what was expected)."""


def strip_thinking(text: str) -> str:
    """Removes reasoning blocks (`<think>...</think>`) that thinking models put before the answer."""
    return _THINK.sub("", text)


# ---- classify ---------------------------------------------------------------------------------

def render_label(deterministic: bool) -> str:
    return f"<label>{DETERMINISTIC if deterministic else NON_DETERMINISTIC}</label>"


_NON_DET = re.compile(r"non[\s_-]*deterministic|not\s+deterministic|multi[\s-]*hop", re.IGNORECASE)
_DET = re.compile(r"\bdeterministic\b|single[\s-]*(fact|hop)", re.IGNORECASE)


def parse_label(text: str) -> bool:
    """True for deterministic. Accepts the tag, a bare word, or 'Label: ...' lines."""
    body = strip_thinking(text)
    match = re.search(r"<label>(.*?)(</label>|$)", body, re.DOTALL | re.IGNORECASE)
    if match:
        body = match.group(1)
    if _NON_DET.search(body):
        return False
    if _DET.search(body):
        return True
    raise FormatError(
        "expected <label>deterministic</label> or <label>non-deterministic</label>, got "
        + _preview(text)
    )


def parse_first_missing(text: str) -> str | None:
    """The <missing> part of a classify-and-plan reply, if any."""
    match = re.search(r"<missing>\s*(.*?)\s*(?:</missing>|$)", strip_thinking(text), re.DOTALL | re.IGNORECASE)
    if not match:
        return None
    return match.group(1).strip() or None


# ---- reason -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Reasoning:
    answer: str | None = None
    missing: str | None = None


def render_answer(answer: str) -> str:
    return f"<answer>{answer}</answer>"


def render_missing(missing: str) -> str:
    return f"<missing>{missing}</missing>"


_TAG = re.compile(r"<(answer|missing)>\s*(.*?)\s*(?:</\1>|<(?:answer|missing)>|$)", re.DOTALL | re.IGNORECASE)
_PLAIN = re.compile(r"^\s*(?:final\s+)?(answer|missing(?:\s+information)?)\s*[:：]\s*(.+)", re.IGNORECASE | re.MULTILINE)


def parse_reasoning(text: str) -> Reasoning:
    """The R-Agent's decision. The last tag wins when a model writes both (it usually corrects
    itself); 'Answer: ...' / 'Missing: ...' lines are accepted too."""
    body = strip_thinking(text)
    tags = _TAG.findall(body)
    if tags:
        kind, value = tags[-1]
        value = value.strip()
        if value:
            return Reasoning(answer=value) if kind.lower() == "answer" else Reasoning(missing=value)
    plain = _PLAIN.findall(body)
    if plain:
        kind, value = plain[-1]
        value = value.strip()
        if kind.lower().startswith("answer"):
            return Reasoning(answer=value)
        return Reasoning(missing=value)
    raise FormatError("expected <answer>...</answer> or <missing>...</missing>, got " + _preview(text))


# ---- act --------------------------------------------------------------------------------------

def render_code(code: str) -> str:
    return "<code>\n" + code.strip("\n") + "\n</code>"


_CODE_TAG = re.compile(r"<code>\n?(.*?)(?:</code>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|$)", re.DOTALL | re.IGNORECASE)


def parse_code(text: str) -> str:
    """The A-Agent's snippet: inside <code>, else inside a ``` fence, else the whole reply when it
    parses as Python."""
    body = strip_thinking(text)
    for pattern in (_CODE_TAG, _FENCE):
        match = pattern.search(body)
        if match and match.group(1).strip():
            code = match.group(1)
            # A fence inside the tag (models combine both).
            inner = _FENCE.search(code)
            if inner and inner.group(1).strip():
                code = inner.group(1)
            return _dedent(code)
    candidate = _dedent(body)
    if candidate.strip():
        try:
            ast.parse(candidate)
            return candidate
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            # Untrusted text: deep nesting makes the parser raise RecursionError/MemoryError, a
            # NUL or a lone surrogate a ValueError; none of them is a snippet.
            pass
    raise FormatError("expected the snippet inside <code>...</code>, got " + _preview(text))


def _dedent(code: str) -> str:
    import textwrap

    return textwrap.dedent(code).strip("\n")


# ---- Graph-CoT --------------------------------------------------------------------------------

GRAPHCOT_FUNCTIONS = ("RetrieveNode", "NodeFeature", "NeighbourCheck", "NodeDegree", "Finish")


@dataclass(frozen=True)
class Action:
    name: str
    argument: str


def render_actions(actions: list[Action]) -> str:
    return ", ".join(f"{a.name}[{a.argument}]" for a in actions)


def clean_step_text(text: str, kind: str, step: int) -> str:
    """One line of a Graph-CoT step: drops thinking, a repeated 'Thought 3:' / 'Action 3:' label and
    anything after a label of the other kind (models run on into the next field)."""
    body = strip_thinking(text).strip()
    body = re.sub(rf"^\s*{kind}\s*\d*\s*:\s*", "", body, flags=re.IGNORECASE)
    other = "Action" if kind == "Thought" else "Observation|Thought"
    body = re.split(rf"\b(?:{other})\s*\d*\s*:", body, maxsplit=1)[0]
    return body.strip().splitlines()[0].strip() if body.strip() else ""


_CALL = re.compile(r"(\w+)\[(.*?)\]")


def parse_actions(text: str) -> list[Action]:
    """Bracket actions of one step, the way the original splits them (`Word[...]`, non-greedy), plus
    leniency: a missing final `]`, an 'Action n:' label, a Finish whose answer contains brackets,
    and the name in any letter case."""
    body = clean_step_text(text, "Action", 0) if text else ""
    if not body:
        return []
    finish = re.match(r"\s*finish\s*\[(.*)\]?\s*$", body, re.IGNORECASE | re.DOTALL)
    if finish:
        argument = finish.group(1)
        if argument.endswith("]") and argument.count("[") < argument.count("]"):
            argument = argument[:-1]
        return [Action("Finish", argument.strip())]
    if body.count("[") > body.count("]"):
        body = body + "]"
    canonical = {name.lower(): name for name in GRAPHCOT_FUNCTIONS}
    canonical["neighborcheck"] = "NeighbourCheck"
    actions = []
    for name, argument in _CALL.findall(body):
        actions.append(Action(canonical.get(name.lower(), name), argument))
    return actions


def _preview(text: str, limit: int = 200) -> str:
    text = text.strip()
    if not text:
        return "an empty reply"
    return repr(text if len(text) <= limit else text[:limit] + "...")


# ---- notebook facts (written by the agents, read back by the scripted policy) ----------------

def render_fact(number: int, missing: str, output: str) -> str:
    """A notebook entry for one snippet's printed output."""
    return f"<fact n=\"{number}\">\nNeeded: {missing}\nFound:\n{output.rstrip()}\n</fact>\n"


_FACT = re.compile(r"<fact n=\"(\d+)\">\nNeeded: (.*?)\nFound:\n(.*?)\n</fact>", re.DOTALL)


def parse_fact(text: str) -> tuple[int, str, str] | None:
    """(number, missing, output) of a fact segment, or None."""
    match = _FACT.search(text)
    if not match:
        return None
    return int(match.group(1)), match.group(2), match.group(3)
