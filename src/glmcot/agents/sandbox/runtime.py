"""What a worker process runs for each snippet (imported only inside the worker)."""

from __future__ import annotations

import builtins
import inspect
import json
import time
from typing import Any

from glmcot.agents.sandbox import policy
from glmcot.agents.sandbox.limits import (
    SAFE_BUILTIN_NAMES,
    RetrievalFailed,
    SandboxLimit,
    clear_cpu_budget,
    error_record,
    set_cpu_budget,
)


class _Output:
    def __init__(self, limit: int):
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0

    def print(self, *values: Any, sep: str | None = " ", end: str | None = "\n") -> None:
        sep = " " if sep is None else str(sep)
        end = "\n" if end is None else str(end)
        text = sep.join(str(value) for value in values) + end
        self.size += len(text)
        if self.size > self.limit:
            keep = self.limit - (self.size - len(text))
            if keep > 0:
                self.parts.append(text[:keep])
            raise SandboxLimit("output", f"the snippet printed more than {self.limit} characters; print only what is needed")
        self.parts.append(text)

    def text(self) -> str:
        return "".join(self.parts)


class PlainCallable:
    """A function as a snippet sees it: called like the function, shown as `label`. Python's own
    repr of a closure or bound method shows a heap address and internal names
    (`<function SnippetRuntime.run.<locals>...call at 0x7f...>`); a snippet's output shows neither.
    Its attributes start with "_", which no snippet can reach."""

    __slots__ = ("_function", "_label", "_name", "_signature")

    def __init__(self, function: Any, label: str, name: str | None = None, checked: Any = None) -> None:
        """`checked`: the function whose parameters a call must fit; a call that does not is a
        TypeError naming `name` (Python's own message names the internal function)."""
        self._function = function
        self._label = label
        self._name = name
        self._signature = inspect.signature(checked) if checked is not None else None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._signature is not None:
            try:
                self._signature.bind(*args, **kwargs)
            except TypeError as error:
                raise TypeError(f"{self._name}(): {error}") from None
        return self._function(*args, **kwargs)

    def __repr__(self) -> str:
        return self._label


class PlainIterable:
    """zip/enumerate/reversed as a snippet sees them: iterated natively, shown as `<zip object>`
    (not `<zip object at 0x7f...>`)."""

    __slots__ = ("_inner", "_label")

    def __init__(self, inner: Any, label: str) -> None:
        self._inner = inner
        self._label = label

    def __iter__(self) -> Any:
        return iter(self._inner)

    def __repr__(self) -> str:
        return self._label


# Error messages name an object's type ("unsupported operand type(s) for +: 'int' and 'function'"):
# the snippet sees the type of what it handles, not the runtime's class names.
PlainCallable.__name__ = PlainCallable.__qualname__ = "function"
PlainIterable.__name__ = PlainIterable.__qualname__ = "iterator"


def plain_function(value: Any) -> Any:
    """What the policy wraps around a lambda or a method taken as a value."""
    if not callable(value) or isinstance(value, (PlainCallable, type)):
        return value
    name = getattr(value, "__name__", "function")
    return PlainCallable(value, "<function <lambda>>" if name == "<lambda>" else f"<method {name}>")


def _plain_iterable_maker(name: str, make: Any) -> PlainCallable:
    return PlainCallable(lambda *args, **kwargs: PlainIterable(make(*args, **kwargs), f"<{name} object>"),
                         f"<built-in function {name}>")


def _plain_iterables(names: dict[str, Any]) -> dict[str, Any]:
    """zip, enumerate and reversed (when allowed) returning PlainIterables."""
    return {name: _plain_iterable_maker(name, names[name]) for name in ("zip", "enumerate", "reversed") if name in names}


class SnippetRuntime:
    """Runs snippets over `graph` (a GraphSource inside this worker: the memory-mapped store), or,
    with `graph` None, over the parent's live source: each primitive is then one call to the
    parent over the channel, and the parent says whether the id named a node (what `touched`
    records)."""

    def __init__(self, graph, conn, options: dict):
        from glmcot.graph.tools.primitives import PRIMITIVES, GraphTools, GraphToolError

        self.graph = graph
        self.conn = conn
        self.options = options
        self.tool_error = GraphToolError
        self.remote_touch: dict[str, bool] = {}  # id -> whether the parent found it, per call
        if graph is not None:
            self.tools = GraphTools(graph, retriever=None, neighbour_limit=int(options.get("neighbour_limit", 50)))
            self.functions = self.tools.functions()
        else:
            self.tools = None
            self.functions = {name: self._remote(name) for name in PRIMITIVES if name != "RetrieveNode"}
        self.builtins = {name: getattr(builtins, name) for name in SAFE_BUILTIN_NAMES if hasattr(builtins, name)}
        self.builtins.update({"True": True, "False": False, "None": None})
        self.builtins.update(_plain_iterables(self.builtins))

    def _known(self, node_id: str) -> bool:
        if self.graph is not None:
            return self.graph.resolve(node_id) is not None
        return self.remote_touch.get(node_id, False)

    def _remote(self, name: str):
        from glmcot.graph import errors
        from glmcot.graph.tools.primitives import NeighbourList

        def call(*args, **kwargs):
            try:
                message = json.dumps(["call", [name, list(args), kwargs]], ensure_ascii=True)
            except (TypeError, ValueError):
                kinds = ", ".join(type(value).__name__ for value in [*args, *kwargs.values()])
                raise errors.GraphToolError(f"{name} takes node id and name strings, got {kinds}") from None
            self.conn.connection.send_bytes(message.encode("ascii"))
            ok, value, found = self.conn.recv()
            if args and isinstance(args[0], str):
                self.remote_touch[args[0]] = bool(found)
            if not ok:
                error_type = getattr(errors, str(value.get("type")), errors.GraphToolError)
                if not (isinstance(error_type, type) and issubclass(error_type, errors.GraphToolError)):
                    error_type = errors.GraphToolError
                raise error_type(str(value.get("message")))
            if name == "NeighbourCheck":
                return NeighbourList(value["ids"], int(value["total"]))
            return value

        call.__name__ = name
        return call

    def run(self, job: dict) -> dict:
        source = job["code"]
        started = time.perf_counter()
        output = _Output(int(job.get("max_output", 8000)))
        touched: list[str] = []
        seen: set[str] = set()
        calls = {"n": 0}
        max_calls = int(job.get("max_calls", 2000))
        max_query = int(job.get("max_query_chars", 2000))
        retrieval = {"seconds": 0.0}
        self.remote_touch.clear()
        # The subgraph the snippet walked, for the trace's pictures: RetrieveNode text -> node,
        # and each relation followed (NeighbourCheck) with the neighbours it returned; bounded.
        max_walk = int(job.get("max_walk", 200))
        retrieved: list[list[str]] = []
        follows: list[list[Any]] = []

        def touch(node_id: Any) -> None:
            if isinstance(node_id, str) and node_id not in seen and self._known(node_id):
                seen.add(node_id)
                touched.append(node_id)

        def count() -> None:
            calls["n"] += 1
            if calls["n"] > max_calls:
                raise SandboxLimit("calls", f"the snippet made more than {max_calls} primitive calls")

        def retrieve_node(text: Any) -> str:
            count()
            if not isinstance(text, str):
                raise TypeError("RetrieveNode takes a string")
            if len(text) > max_query:
                raise ValueError(f"the RetrieveNode text is {len(text)} characters; at most {max_query} (pass the name or title only)")
            t0 = time.perf_counter()
            self.conn.send(["retrieve", text])
            ok, value = self.conn.recv()
            retrieval["seconds"] += time.perf_counter() - t0
            if not ok:
                raise RetrievalFailed(value)
            if self.graph is None:
                self.remote_touch[value] = True  # RetrieveNode names a node
            touch(value)
            if len(retrieved) < max_walk:
                retrieved.append([text[:200], str(value)])
            return value

        def wrap(name: str, function):
            def call(*args, **kwargs):
                count()
                if self.graph is None:  # the parent says whether the id named a node
                    try:
                        value = function(*args, **kwargs)
                    finally:
                        if args:
                            touch(args[0])
                else:
                    if args:
                        touch(args[0])
                    value = function(*args, **kwargs)
                if (name == "NeighbourCheck" and len(args) >= 2 and isinstance(args[0], str)
                        and isinstance(args[1], str) and len(follows) < max_walk):
                    follows.append([args[0], args[1][:100], [str(n) for n in list(value)[:max_walk]]])
                return value

            call.__name__ = name
            return call

        scope: dict[str, Any] = {"__builtins__": dict(self.builtins), policy.PLAIN_FUNCTION_NAME: plain_function}
        for name in policy.PRIMITIVES:
            if name == "RetrieveNode":
                scope[name] = PlainCallable(retrieve_node, f"<primitive {name}>", name, retrieve_node)
            elif name in self.functions:
                scope[name] = PlainCallable(wrap(name, self.functions[name]), f"<primitive {name}>", name,
                                            self.functions[name])
        scope["print"] = PlainCallable(output.print, "<built-in function print>", "print", output.print)
        result: dict[str, Any] = {"ok": True, "error": None, "recycle": False}
        try:
            checked = policy.check_snippet(source, max_chars=int(job.get("max_code_chars", 8000)))
            try:
                code = compile(checked.tree, "<snippet>", "exec")
            except (RecursionError, MemoryError):  # the nesting bound should make this unreachable
                raise policy.SnippetRejected("the snippet nests too deeply to compile") from None
            except (SyntaxError, ValueError) as error:
                raise policy.SnippetRejected(f"the snippet cannot be compiled: {error}") from None
        except policy.SnippetRejected as error:
            result.update(ok=False, error={"kind": "rejected", "type": "SnippetRejected", "message": error.message, "line": error.line})
            code = None
        if code is not None:
            try:
                set_cpu_budget(float(job.get("cpu_s", 5.0)))
                try:
                    exec(code, scope)
                finally:
                    clear_cpu_budget()
            except SandboxLimit as error:
                result.update(ok=False, error=error_record(error, error.kind))
            except RetrievalFailed as error:
                result.update(ok=False, error=error_record(error, "retrieval"))
            except self.tool_error as error:
                result.update(ok=False, error=error_record(error, "graph"))
            except MemoryError as error:
                result.update(ok=False, error=error_record(error, "memory"), recycle=True)
            except RecursionError as error:
                result.update(ok=False, error=error_record(error, "exception"), recycle=True)
            except Exception as error:
                result.update(ok=False, error=error_record(error, "exception"))
        chunks = []
        chunk_limit = int(job.get("chunk_limit", 3))
        for node_id in touched[:chunk_limit]:
            try:
                chunks.append((node_id, self.functions["NodeInfo"](node_id)))
            except Exception:
                continue
        labels = {}
        for node_id in touched[:max_walk] + [n for _, _, found in follows for n in found][:max_walk]:
            if node_id not in labels:
                try:  # a live source's texts stay with the parent: its pictures show ids only
                    found = self.graph is not None and self.graph.resolve(node_id) is not None
                    labels[node_id] = (self.graph.texts([node_id])[0] or "")[:200] if found else ""
                except Exception:
                    labels[node_id] = ""
        # Drop references held by the snippet's scope before the next job.
        scope.clear()
        result.update(
            output=output.text(),
            touched=touched,
            chunks=chunks,
            retrieved=retrieved,
            follows=follows,
            labels=labels,
            calls=calls["n"],
            seconds=time.perf_counter() - started,
            retrieval_s=retrieval["seconds"],
        )
        return result
