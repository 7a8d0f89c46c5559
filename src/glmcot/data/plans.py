"""Run gold plans against the graph primitives (plain execution: plans are our own code; the
agents' sandbox is what runs LLM-written code).

Graph-CoT plan semantics (docs/datasets.md): `$k` is the result of action k; `$k[*]` calls the
tool once per element of that result, flattening one level when the result is itself a list of
per-element results; `$answer` is what the GLM plan's last step printed.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from typing import Any

from glmcot.data.questions import GraphCoTAction, Plan

_ACTION = re.compile(r"^(\w+)\[(.*)\]$", re.S)
_REF = re.compile(r"^\$(\d+)(\[\*\])?$")
TOOLS = ("RetrieveNode", "NodeFeature", "NeighbourCheck", "NodeDegree")


class PlanError(RuntimeError):
    pass


def run_glm_plan(tools, plan: Plan) -> list[str]:
    """Execute each GLM step in a fresh namespace holding only the primitives and print.
    Returns what each step printed (stripped)."""
    outputs = []
    for number, step in enumerate(plan.glm):
        buffer = io.StringIO()
        scope: dict[str, Any] = dict(tools.functions())
        scope["__builtins__"] = __builtins__
        try:
            with contextlib.redirect_stdout(buffer):
                exec(compile(step.code, f"<plan step {number}>", "exec"), scope)  # noqa: S102
        except Exception as exc:  # report which step broke and why
            raise PlanError(f"step {number} failed: {type(exc).__name__}: {exc}") from exc
        outputs.append(buffer.getvalue().strip())
    return outputs


@dataclass
class GraphCoTTrace:
    results: list[Any]
    finish: str | None


def _flatten(value: Any) -> list[Any]:
    if not isinstance(value, list):
        return [value]
    out: list[Any] = []
    for item in value:
        out.extend(item if isinstance(item, list) else [item])
    return out


def run_graphcot_plan(tools, actions: list[GraphCoTAction], answer: str = "") -> GraphCoTTrace:
    """Execute the bracket actions; returns every action's result and the Finish text."""
    results: list[Any] = []
    finish = None
    for number, item in enumerate(actions):
        match = _ACTION.match(item.action.strip())
        if not match:
            raise PlanError(f"action {number} is not Name[args]: {item.action!r}")
        name, body = match.groups()
        if name == "Finish":
            finish = answer if body.strip() == "$answer" else body
            results.append(finish)
            break
        if name not in TOOLS:
            raise PlanError(f"action {number}: unknown tool {name}")
        fn = getattr(tools, name)
        if name == "RetrieveNode":
            results.append(fn(body))
            continue
        parts = body.split(", ")
        if len(parts) != 2:
            raise PlanError(f"action {number}: {name} takes two arguments, got {body!r}")
        node, arg = parts
        ref = _REF.match(node.strip())
        if ref is None:
            results.append(fn(node.strip(), arg))
            continue
        k = int(ref.group(1))
        if k >= len(results):
            raise PlanError(f"action {number} refers to ${k}, which has not run yet")
        if ref.group(2):
            results.append([fn(x, arg) for x in _flatten(results[k])])
        else:
            results.append(fn(results[k], arg))
    return GraphCoTTrace(results, finish)
