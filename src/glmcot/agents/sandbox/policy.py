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


# Nesting bounds. Python's parser, the AST conversion, NodeTransformer and compile() all recurse
# on nesting depth, so `not not ... 1` or 4,000 chained `+` under the size cap would otherwise
# raise RecursionError/MemoryError in the parent. Real snippets nest 10-30 levels.
MAX_NESTING = 100  # AST levels (exact, after parsing)
MAX_ESTIMATED_NESTING = 200  # the pre-scan's over-estimate (before parsing)

_NESTING_WORDS = frozenset({"not", "and", "or", "if", "else", "lambda", "in", "is", "await"})
_OPERATOR_CHARS = frozenset("+-*/%@&|^~<>!.")
_OPENERS = frozenset("([{")
_CLOSERS = frozenset(")]}")


def estimated_nesting(source: str) -> int:
    """An over-estimate of the AST depth of `source`, in one linear pass without recursion:
    per open bracket level, 1 plus the operators, keywords and calls chained since the last `,`
    `;` `:` `=` or line end at that level. String literals and comments are skipped (the exact
    AST check after parsing covers f-string expressions)."""
    counts = [0]  # chained operators per open bracket level
    total = 1  # sum(counts) + len(counts): the estimate at the current point
    deepest = 1
    length = len(source)
    i = 0
    while i < length:
        char = source[i]
        if char == "#":
            end = source.find("\n", i)
            i = length if end < 0 else end
            continue
        if char in "'\"":
            quote = source[i : i + 3] if source[i : i + 3] in ("'''", '"""') else char
            i += len(quote)
            while i < length:
                if source[i] == "\\":
                    i += 2
                    continue
                if source.startswith(quote, i):
                    break
                if len(quote) == 1 and source[i] == "\n":
                    break
                i += 1
            i += len(quote)
            continue
        if char.isalpha() or char == "_":
            start = i
            while i < length and (source[i].isalnum() or source[i] == "_"):
                i += 1
            if source[start:i] in _NESTING_WORDS:
                counts[-1] += 1
                total += 1
            continue
        if char in _OPENERS:
            counts[-1] += 1  # a call, subscript or display is one more level of the outer chain
            counts.append(0)
            total += 2
        elif char in _CLOSERS:
            if len(counts) > 1:
                total -= counts.pop() + 1
        elif char in ",;:" or (char == "=" and source[i - 1 : i] not in ("=", "<", ">", "!") and source[i + 1 : i + 2] != "=") or (char == "\n" and len(counts) == 1):
            total -= counts[-1]
            counts[-1] = 0
        elif char in _OPERATOR_CHARS:
            counts[-1] += 1
            total += 1
        if total > deepest:
            deepest = total
            if deepest > MAX_ESTIMATED_NESTING:
                return deepest
        i += 1
    return deepest


def nesting_depth(tree: ast.AST, limit: int = MAX_NESTING) -> int:
    """The AST depth of `tree` (iterative; stops counting once past `limit`)."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


_TOO_DEEP = "the snippet nests too deeply (at most {limit} levels): split long chains of operators or calls into several lines"


def _surrogate_at(source: str) -> int:
    """Index of the first lone surrogate code point (not encodable as UTF-8), or -1."""
    try:
        source.encode("utf-8")
        return -1
    except UnicodeEncodeError as error:
        return error.start


def parse_snippet(source: str, *, max_chars: int = 8000) -> ast.Module:
    """Parses a snippet with every bound checked first; raises SnippetRejected (never
    RecursionError, MemoryError or an encoding error)."""
    if len(source) > max_chars:
        raise SnippetRejected(f"the snippet is {len(source)} characters; keep it under {max_chars}")
    if "\x00" in source:
        raise SnippetRejected("the snippet contains a NUL character")
    position = _surrogate_at(source)
    if position >= 0:
        line = source.count("\n", 0, position) + 1
        raise SnippetRejected(f"the snippet contains a lone surrogate (U+{ord(source[position]):04X}), which is not valid text", line)
    if estimated_nesting(source) > MAX_ESTIMATED_NESTING:
        raise SnippetRejected(_TOO_DEEP.format(limit=MAX_NESTING))
    try:
        tree = ast.parse(source, filename="<snippet>", mode="exec")
    except SyntaxError as error:
        raise SnippetRejected(f"SyntaxError: {error.msg}", error.lineno) from None
    except (RecursionError, MemoryError):
        raise SnippetRejected(_TOO_DEEP.format(limit=MAX_NESTING)) from None
    except ValueError as error:
        raise SnippetRejected(f"the snippet cannot be parsed: {error}") from None
    if nesting_depth(tree) > MAX_NESTING:
        raise SnippetRejected(_TOO_DEEP.format(limit=MAX_NESTING))
    return tree


def check_snippet(source: str, *, max_chars: int = 8000) -> CheckedSnippet:
    """Parses and checks a snippet; raises SnippetRejected with the reason and line."""
    tree = parse_snippet(source, max_chars=max_chars)
    try:
        return _check_tree(source, tree)
    except (RecursionError, MemoryError):  # a last wall: the depth bound above should prevent it
        raise SnippetRejected(_TOO_DEEP.format(limit=MAX_NESTING)) from None


def _check_tree(source: str, tree: ast.Module) -> CheckedSnippet:
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
    tree = _PlainFunctionValues().visit(tree)
    ast.fix_missing_locations(tree)
    return CheckedSnippet(source=source, tree=tree)


# What the snippet runtime binds to the wrapper below (a name no snippet can write: it starts with "_").
PLAIN_FUNCTION_NAME = "__glmcot_plain__"


class _PlainFunctionValues(ast.NodeTransformer):
    """Wraps every function the snippet makes or takes as a value (a lambda, `d.get` passed as a
    key) in the runtime's plain callable, whose repr is `<function <lambda>>` or `<method get>`:
    Python's own repr of those shows a heap address. Methods called at once are left alone."""

    def _wrap(self, node: ast.expr) -> ast.expr:
        call = ast.Call(func=ast.Name(id=PLAIN_FUNCTION_NAME, ctx=ast.Load()), args=[node], keywords=[])
        return ast.copy_location(call, node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        self.generic_visit(node)
        return self._wrap(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        return self._wrap(node) if isinstance(node.ctx, ast.Load) else node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Attribute):   # x.append(...): called, never seen as a value
            node.func.value = self.visit(node.func.value)
        else:
            node.func = self.visit(node.func)
        node.args = [self.visit(argument) for argument in node.args]
        node.keywords = [self.visit(keyword) for keyword in node.keywords]
        return node


def extract_retrieve_texts(source: str, *, max_chars: int = 8000) -> list[str]:
    """The string literals passed to RetrieveNode, in order (for pre-resolution and pipelining)."""
    try:
        tree = parse_snippet(source, max_chars=max_chars)
    except SnippetRejected:
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
