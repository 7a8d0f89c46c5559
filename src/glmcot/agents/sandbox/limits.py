"""What a snippet may use and what stops it, shared by the worker process and the snippet runtime:
the allowlisted builtins, the limit and retrieval exceptions, the CPU budget, error records."""

from __future__ import annotations

import resource
import traceback
from typing import Any

SAFE_BUILTIN_NAMES = (
    "len", "range", "sorted", "reversed", "enumerate", "zip", "min", "max", "sum", "abs", "round",
    "any", "all", "set", "list", "dict", "tuple", "str", "int", "float", "bool", "isinstance",
    "True", "False", "None",
)
SAFE_EXCEPTIONS = ("Exception", "ValueError", "KeyError", "IndexError", "TypeError", "ZeroDivisionError")


class SandboxLimit(Exception):
    """A per-snippet limit was hit (CPU, output, calls); `kind` names which."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class RetrievalFailed(Exception):
    """RetrieveNode found nothing (or the graph has no retrieval index)."""


def on_cpu_limit(signum, frame):  # pragma: no cover - exercised in a subprocess
    raise SandboxLimit("cpu", "the snippet used up its CPU time (an endless or very long loop?)")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def set_cpu_budget(seconds: float) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    target = int(_cpu_seconds() + seconds) + 1
    if hard != resource.RLIM_INFINITY:
        target = min(target, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (target, hard))


def clear_cpu_budget() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))


def error_record(error: BaseException, kind: str) -> dict[str, Any]:
    line = None
    for frame, lineno in traceback.walk_tb(error.__traceback__):
        if frame.f_code.co_filename == "<snippet>":
            line = lineno
    message = str(error)
    if len(message) > 500:
        message = message[:500] + "..."
    return {"kind": kind, "type": type(error).__name__, "message": message, "line": line}
