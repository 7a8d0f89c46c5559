"""Layer 1 of the sandbox: the grammar allowlist for A-Agent snippets.

A snippet may use assignments, `for`, `while`, `if`, comparisons, arithmetic, literals,
comprehensions, f-strings, `lambda` (sort keys), calls to the five primitives and a few builtins,
and a short list of str/list/dict/set methods. Everything else is rejected before any code runs:
imports, `def`/`class`, `try`/`with`/`match`, global/nonlocal, `del`, `yield`, any name or
attribute starting with `_`, any attribute outside the allowlist (so no `format`, `format_map`,
`gi_frame`, `mro`...). Generator expressions are rewritten as list comprehensions, so
`sum(x for x in xs)` works and no generator object (with its frame) ever exists.

`while` and `lambda` are allowed (unlike the strictest published allowlists) because models and
the gold plans write BFS loops and `key=lambda ...` all the time, and neither reaches anything new:
a lambda body passes the same checks, and what they add is only the ability to run long, which
layer 4 bounds. This layer blocks escapes by construction; it does not bound time or memory
(`while True: pass` is valid): the worker process does that (CPU, wall time, memory).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

PRIMITIVES = ("RetrieveNode", "NodeInfo", "NodeFeature", "NeighbourCheck", "NodeDegree")

BUILTINS = (
    "print", "len", "range", "sorted", "reversed", "enumerate", "zip", "min", "max", "sum", "abs",
    "round", "any", "all", "set", "list", "dict", "tuple", "str", "int", "float", "bool",
    "isinstance",
)

METHODS = frozenset(
    {
        # str
        "lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit", "join", "startswith",
        "endswith", "replace", "find", "count", "title", "isdigit", "splitlines",
        # list
        "append", "extend", "index", "insert", "pop", "remove", "sort", "reverse",
        # dict
        "get", "items", "keys", "values", "setdefault", "update",
        # set
        "add", "discard", "union", "intersection", "difference", "issubset", "issuperset",
    }
)

_ALLOWED_NODES = (
    ast.Module, ast.Expr, ast.Assign, ast.AugAssign, ast.For, ast.If, ast.Break, ast.Continue,
    ast.Pass, ast.Compare, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.IfExp, ast.List, ast.Tuple,
    ast.Dict, ast.Set, ast.Subscript, ast.Slice, ast.ListComp, ast.SetComp, ast.DictComp,
    ast.comprehension, ast.JoinedStr, ast.FormattedValue, ast.Call, ast.keyword, ast.Attribute,
    ast.Name, ast.Constant, ast.Starred, ast.Load, ast.Store, ast.While, ast.Lambda, ast.arguments,
    ast.arg,
    ast.operator, ast.boolop, ast.cmpop, ast.unaryop, ast.expr_context,
)

_EXPLAIN = {
    ast.Import: "imports are not available: the primitives and builtins are already in scope",
    ast.ImportFrom: "imports are not available: the primitives and builtins are already in scope",
    ast.FunctionDef: "defining functions is not allowed: write the steps inline",
    ast.AsyncFunctionDef: "defining functions is not allowed: write the steps inline",
    ast.ClassDef: "classes are not allowed",
    ast.Try: "`try` is not allowed: errors are reported back to you",
    ast.With: "`with` is not allowed",
    ast.Global: "`global` is not allowed",
    ast.Nonlocal: "`nonlocal` is not allowed",
    ast.Delete: "`del` is not allowed",
    ast.Return: "`return` is not allowed outside a function: print the result",
    ast.Yield: "`yield` is not allowed",
    ast.Await: "`await` is not allowed",
    ast.NamedExpr: "`:=` is not allowed",
    ast.Raise: "`raise` is not allowed",
    ast.Assert: "`assert` is not allowed",
}


class SnippetRejected(ValueError):
    """The snippet uses something outside the allowlist; `line` is 1-based or None."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass(frozen=True)
class CheckedSnippet:
    source: str
    tree: ast.Module


class _GeneratorsToLists(ast.NodeTransformer):
    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(ast.ListComp(elt=node.elt, generators=node.generators), node)


def check_snippet(source: str, *, max_chars: int = 8000) -> CheckedSnippet:
    """Parses and checks a snippet; raises SnippetRejected with the reason and line."""
    if len(source) > max_chars:
        raise SnippetRejected(f"the snippet is {len(source)} characters; keep it under {max_chars}")
    if "\x00" in source:
        raise SnippetRejected("the snippet contains a NUL character")
    try:
        tree = ast.parse(source, filename="<snippet>", mode="exec")
    except SyntaxError as error:
        raise SnippetRejected(f"SyntaxError: {error.msg}", error.lineno) from None
    tree = _GeneratorsToLists().visit(tree)
    ast.fix_missing_locations(tree)
    callables = set(PRIMITIVES) | set(BUILTINS)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        if not isinstance(node, _ALLOWED_NODES):
            reason = _EXPLAIN.get(type(node), f"`{type(node).__name__}` is not allowed in a snippet")
            raise SnippetRejected(reason, line)
        if isinstance(node, ast.Name) and node.id.startswith("_"):
            raise SnippetRejected(f"names starting with '_' are not allowed ({node.id})", line)
        if isinstance(node, ast.arg) and node.arg.startswith("_"):
            raise SnippetRejected(f"names starting with '_' are not allowed ({node.arg})", line)
        if isinstance(node, ast.arg) and node.annotation is not None:
            raise SnippetRejected("annotations are not allowed", line)
        if isinstance(node, ast.Attribute):
            if node.attr not in METHODS:
                raise SnippetRejected(f"attribute `.{node.attr}` is not allowed; allowed: {', '.join(sorted(METHODS))}", line)
            if not isinstance(node.ctx, ast.Load):
                raise SnippetRejected("assigning to attributes is not allowed", line)
        if isinstance(node, ast.Call):
            function = node.func
            if isinstance(function, ast.Name):
                if function.id not in callables:
                    raise SnippetRejected(
                        f"`{function.id}(...)` is not available; callable: {', '.join(PRIMITIVES + BUILTINS)} and methods", line
                    )
            elif not isinstance(function, ast.Attribute):
                raise SnippetRejected("only named functions and methods can be called", line)
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            for part in ast.walk(node.format_spec):
                if isinstance(part, ast.FormattedValue):
                    raise SnippetRejected("nested format specs are not allowed", line)
        if isinstance(node, ast.Constant) and isinstance(node.value, (bytes,)):
            raise SnippetRejected("bytes literals are not allowed", line)
    return CheckedSnippet(source=source, tree=tree)


def extract_retrieve_texts(source: str) -> list[str]:
    """The string literals passed to RetrieveNode, in order (for pre-resolution and pipelining)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    texts = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "RetrieveNode"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            texts.append(node.args[0].value)
    return texts
