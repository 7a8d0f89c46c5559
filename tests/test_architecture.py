"""The package layering the docs promise: imports point one way down the package order, the
engine imports nothing of glmcot but the contract (the graph store also the crash-safe file
helpers), and no module imports itself back through others (type-checking-only imports excepted)."""

from __future__ import annotations

import ast
from pathlib import Path

import glmcot

ROOT = Path(glmcot.__file__).resolve().parent
# package -> the glmcot packages it may import (besides itself)
ALLOWED = {
    "contract": set(),
    "offline": set(),
    "files": set(),
    "terminal": set(),  # text for a terminal (control characters made visible)
    "runs": {"files"},
    "graph": {"contract", "files", "terminal"},
    "engine": {"contract"},
    "data": {"contract", "graph", "files"},
    "llm": {"contract", "engine", "offline", "vllm_plugin"},  # the plugin's wire format (a pure module)
    "agents": {"contract", "graph", "data", "llm", "files", "runs"},
    "vllm_plugin": {"contract", "files"},
    "mini": {"contract", "graph", "data", "engine", "llm", "agents", "files", "runs"},  # glmcot-mini: trained on the agents' calls
    # the one builder: graph stores, agent contexts, backends (scripted policy, glmcot-mini) and agents
    "system": {"contract", "graph", "data", "engine", "llm", "agents", "mini", "files", "terminal"},
    "eval": {"contract", "graph", "data", "engine", "llm", "agents", "mini", "system", "benchmarks", "offline", "files", "runs",
             "terminal"},
    "benchmarks": {"contract", "graph", "data", "engine", "llm", "agents", "mini", "system", "eval", "serve", "offline",
                   "vllm_plugin", "files", "runs"},
    "serve": {"contract", "graph", "data", "engine", "llm", "agents", "system", "eval", "offline", "files", "runs"},
    # glmcot as tools for outside agents: the MCP server over serve's desk; framework adapters
    "mcp": {"contract", "graph", "data", "engine", "llm", "agents", "system", "serve", "offline", "files", "runs"},
    "integrations": {"contract", "graph", "data", "engine", "llm", "agents", "system", "serve", "offline", "files",
                     "runs"},
    "cli": {"contract", "graph", "data", "engine", "llm", "agents", "mini", "system", "eval", "serve", "benchmarks",
            "offline", "files", "runs", "mcp"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in ROOT.rglob("*.py")}


def imports(name: str, path: Path) -> set[str]:
    """The glmcot modules `name` imports at run time (anywhere in the file, not under TYPE_CHECKING)."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"

    def resolve(target: str) -> None:
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        if target and target != name and not name.startswith(target + "."):
            found.add(target)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                resolve(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join(package + ([node.module] if node.module else []))
            resolve(base)
            for alias in node.names:
                resolve(f"{base}.{alias.name}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {target for target in found if target.startswith("glmcot")}


GRAPH = {name: imports(name, path) for name, path in MODULES.items()}


def package_of(name: str) -> str:
    return name.split(".")[1] if "." in name else ""


def test_every_package_is_in_the_layering():
    assert {package_of(name) for name in MODULES if package_of(name)} <= set(ALLOWED)


def test_imports_point_down_the_package_order():
    wrong = sorted(f"{name} -> {target}" for name, targets in GRAPH.items() for target in targets
                   if package_of(name) and package_of(target) != package_of(name)
                   and package_of(target) not in ALLOWED[package_of(name)])
    assert wrong == []


def test_no_import_cycles():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def strongly_connected(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH[node]:
            if target not in index:
                strongly_connected(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in GRAPH:
        if node not in index:
            strongly_connected(node)
    assert cycles == []


def test_the_backend_spec_is_a_leaf():
    """The spec is read at every edge (the command line, benchmark arguments): it must stay light."""
    assert GRAPH["glmcot.llm.spec"] == set()


# graph's own parts (issue 31's split): subpackage -> the graph parts it may import. The seam
# (graph_source) and errors sit at the bottom; commands and the opener at the top. Updates and the
# node index know each other (an update refreshes the index; the index overlay reads an update's
# report): module imports between them stay acyclic (test_no_import_cycles).
GRAPH_PARTS = {
    "errors": set(),
    "graph_source": {"errors"},
    "storage": {"errors"},
    "importers": {"errors", "storage"},
    "updates": {"errors", "storage", "importers", "index", "tools"},
    "index": {"errors", "storage", "updates"},
    "tools": {"errors", "graph_source", "storage"},
    "live": {"errors", "graph_source", "opener"},
    "opener": {"graph_source", "storage", "live"},
    "commands": {"errors", "graph_source", "opener", "storage", "updates", "importers", "index", "tools", "live"},
}


def test_graph_parts_import_only_what_the_split_allows():
    def part(name: str) -> str | None:
        pieces = name.split(".")
        return pieces[2] if len(pieces) > 2 and pieces[1] == "graph" else None

    parts = {part(name) for name in MODULES} - {None}
    assert parts == set(GRAPH_PARTS), parts ^ set(GRAPH_PARTS)
    wrong = sorted(f"{name} -> {target}" for name, targets in GRAPH.items() for target in targets
                   if part(name) and part(target) and part(target) != part(name)
                   and part(target) not in GRAPH_PARTS[part(name)])
    assert wrong == []
