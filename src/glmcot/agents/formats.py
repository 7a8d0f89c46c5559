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

Every parser is linear in the reply's length (a reply is untrusted and may be 100k+ characters):
the regular expressions here have no two adjacent quantifiers over the same characters (which
backtrack quadratically), and the Graph-CoT labels and bracket calls are plain scans.
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


def valid_text(text: str) -> str:
    """`text` as valid Unicode: each lone surrogate (U+D800-U+DFFF, which an upstream server can
    send as a JSON escape and a snippet can build from one) becomes U+FFFD, and a split surrogate
    pair becomes its character. Lone surrogates cannot be encoded as UTF-8, so without this they
    raise UnicodeEncodeError wherever the text is tokenised, hashed, sent or written."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


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


_FIRST_MISSING = re.compile(r"<missing>(.*?)(?:</missing>|$)", re.DOTALL | re.IGNORECASE)


def parse_first_missing(text: str) -> str | None:
    """The <missing> part of a classify-and-plan reply, if any."""
    match = _FIRST_MISSING.search(strip_thinking(text))
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


# The value is stripped in Python: `\s*(.*?)\s*` would try every split of a whitespace run.
_TAG = re.compile(r"<(answer|missing)>(.*?)(?:</\1>|<(?:answer|missing)>|$)", re.DOTALL | re.IGNORECASE)
# `^[^\S\n]*`, not `^\s*`: the latter re-scans a run of blank lines from each line start in it.
_PLAIN = re.compile(r"^[^\S\n]*(?:final\s+)?(answer|missing(?:\s+information)?)\s*[:：]\s*(.+)", re.IGNORECASE | re.MULTILINE)


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
_FENCE = re.compile(r"```[ \t]*(?:(?:python|py)[ \t]*)?\n(.*?)(?:```|$)", re.DOTALL | re.IGNORECASE)


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


def _is_word_char(char: str) -> bool:
    """What `\\w` matches."""
    return char.isalnum() or char == "_"


def _label_end(text: str, start: int, word: str, *, ignore_case: bool) -> int:
    """When `word` at `start` is a label (`word`, spaces, an optional step number, spaces, a
    colon), the index after the colon, else -1. One greedy pass: the three runs cannot overlap."""
    end = start + len(word)
    found = text[start:end]
    if (found.lower() != word.lower()) if ignore_case else (found != word):
        return -1
    length = len(text)
    while end < length and text[end].isspace():
        end += 1
    while end < length and text[end].isdecimal():
        end += 1
    while end < length and text[end].isspace():
        end += 1
    return end + 1 if text.startswith(":", end) else -1


def _first_label(text: str, words: tuple[str, ...]) -> int:
    """Index of the first `word n:` label (at a word start, exact case), or -1."""
    best = -1
    for word in words:
        start = text.find(word)
        while start >= 0 and (best < 0 or start < best):
            if (start == 0 or not _is_word_char(text[start - 1])) and _label_end(text, start, word, ignore_case=False) >= 0:
                best = start
                break
            start = text.find(word, start + 1)
    return best


def clean_step_text(text: str, kind: str, step: int) -> str:
    """One line of a Graph-CoT step: drops thinking, a repeated 'Thought 3:' / 'Action 3:' label and
    anything after a label of the other kind (models run on into the next field)."""
    body = strip_thinking(text).strip()
    end = _label_end(body, 0, kind, ignore_case=True)
    if end >= 0:
        body = body[end:]
    other = ("Action",) if kind == "Thought" else ("Observation", "Thought")
    cut = _first_label(body, other)
    if cut >= 0:
        body = body[:cut]
    return body.strip().splitlines()[0].strip() if body.strip() else ""


def _bracket_calls(body: str) -> list[tuple[str, str]]:
    """`(name, argument)` for each `name[argument]`, left to right, as `re.findall(r"(\\w+)\\[(.*?)\\]")`
    would find them, in one pass (the regex re-scans a long word from each of its letters)."""
    calls = []
    position = 0
    while True:
        opening = body.find("[", position)
        if opening < 0:
            return calls
        start = opening
        while start > position and _is_word_char(body[start - 1]):
            start -= 1
        if start == opening:  # no name before this bracket
            position = opening + 1
            continue
        closing = body.find("]", opening + 1)
        if closing < 0:
            return calls
        newline = body.find("\n", opening + 1, closing)
        if newline >= 0:  # `.` stops at a newline: no call here
            position = opening + 1
            continue
        calls.append((body[start:opening], body[opening + 1 : closing]))
        position = closing + 1


def parse_actions(text: str) -> list[Action]:
    """Bracket actions of one step, the way the original splits them (`Word[...]`, non-greedy), plus
    leniency: a missing final `]`, an 'Action n:' label, a Finish whose answer contains brackets,
    and the name in any letter case."""
    body = clean_step_text(text, "Action", 0) if text else ""
    if not body:
        return []
    finish = _FINISH.match(body)
    if finish:
        argument = finish.group(1)
        if argument.endswith("]") and argument.count("[") < argument.count("]"):
            argument = argument[:-1]
        return [Action("Finish", argument.strip())]
    if body.count("[") > body.count("]"):
        body = body + "]"
    canonical = {name.lower(): name for name in GRAPHCOT_FUNCTIONS}
    canonical["neighborcheck"] = "NeighbourCheck"
    return [Action(canonical.get(name.lower(), name), argument) for name, argument in _bracket_calls(body)]


_FINISH = re.compile(r"\s*finish\s*\[(.*)\]?\s*$", re.IGNORECASE | re.DOTALL)


def _preview(text: str, limit: int = 200) -> str:
    text = text.strip()
    if not text:
        return "an empty reply"
    return repr(text if len(text) <= limit else text[:limit] + "...")


# ---- notebook facts (written by the agents, read back by the scripted policy) ----------------

def render_fact(number: int, missing: str, output: str) -> str:
    """A notebook entry for one snippet's printed output."""
    return f"<fact n=\"{number}\">\nNeeded: {missing}\nFound:\n{output.rstrip()}\n</fact>\n"


def parse_fact(text: str) -> tuple[int, str, str] | None:
    """(number, missing, output) of a fact segment, or None. Plain finds: a regex with two lazy
    groups re-scans the text once per `Found:` line."""
    start = text.find('<fact n="')
    while start >= 0:
        digits_end = start + len('<fact n="')
        cursor = digits_end
        while cursor < len(text) and text[cursor].isdecimal():
            cursor += 1
        head = '">\nNeeded: '
        if cursor > digits_end and text.startswith(head, cursor):
            needed_start = cursor + len(head)
            found = text.find("\nFound:\n", needed_start)
            if found < 0:
                return None
            output_start = found + len("\nFound:\n")
            end = text.find("\n</fact>", output_start)
            if end < 0:
                return None
            return int(text[digits_end:cursor]), text[needed_start:found], text[output_start:end]
        start = text.find('<fact n="', start + 1)
    return None
