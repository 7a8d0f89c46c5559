"""Feature values: their kinds, the checks an update applies to them, and fresh copies for readers.

A value handed to a reader (a snippet's `NodeFeature`, a vertex chunk) is a fresh copy: the base
store decodes a new object on every read, and a delta's values are copied here, so no reader can
change what another reader sees.
"""

from __future__ import annotations

import math
from typing import Any

MAX_DEPTH = 64  # JSON levels inside one value, as the importer (graph/importers/importer.py DEFAULT_MAX_DEPTH)

KINDS = ("str", "int", "float", "bool", "list", "json")


def fresh(value: Any) -> Any:
    """A copy of a JSON-shaped value that shares no mutable object with the original."""
    if isinstance(value, list):
        return [fresh(item) for item in value]
    if isinstance(value, dict):
        return {key: fresh(item) for key, item in value.items()}
    return value  # str, int, float, bool, None: immutable


def value_kind(value: Any) -> str:
    """The column kind a value is stored in (graph/storage/writer.py): list means a list of strings."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if -(2**63) <= value < 2**63 else "json"  # the writer keeps wider integers as JSON text
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "list"
    return "json"


def has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def value_problem(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why a feature value cannot be stored (None when it can): only JSON values (no NaN or
    infinity), valid Unicode text, at most ``max_depth`` levels of lists and objects."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                return "holds a lone surrogate (text must be valid Unicode)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"is {item!r}; use null to remove a value"
        elif item is None or isinstance(item, (bool, int)):
            continue
        elif isinstance(item, (list, dict)):
            if depth > max_depth:
                return f"nests deeper than {max_depth} levels"
            if isinstance(item, dict):
                for key in item:
                    if not isinstance(key, str):
                        return f"has a non-string key {key!r}"
                    if has_lone_surrogate(key):
                        return "has a key with a lone surrogate (text must be valid Unicode)"
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)
        else:
            return f"is a {type(item).__name__}, not a JSON value"
    return None


__all__ = ["fresh", "value_kind", "value_problem", "has_lone_surrogate", "MAX_DEPTH", "KINDS"]
