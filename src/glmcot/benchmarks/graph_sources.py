"""Graph sources benchmark: the primitives and vertex chunks on the store (the direct index path
the primitives used before the GraphSource seam, and through the seam), on FalkorDB and on a
SPARQL endpoint (Oxigraph), all started here; the sandbox's proxy to a live source; and a scripted
question end to end on each source.

    python -m glmcot.benchmarks.graph_sources                       # dblp, tiny scale
    python -m glmcot.benchmarks.graph_sources --samples 400 --questions 6 --out runs/graph_sources.json

Latencies are medians and 99th percentiles over the same sampled nodes on every source, in one
run; compare ratios, not absolute times, on a shared machine. The scripted policy measures the
system (it replays gold plans), never model accuracy.
"""

from __future__ import annotations

from glmcot.offline import stay_offline

import argparse
import json
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from glmcot.graph.tools.chunks import DEFAULT_CHUNK_CONFIG, render_chunk_at
from glmcot.graph.opener import open_source
from glmcot.graph.tools.primitives import GraphTools


class DirectTools:
    """The primitives as they read the store before the seam (c80dc8e): index lookups on `Graph`."""

    def __init__(self, graph, neighbour_limit: int = 50):
        self.graph = graph
        self.limit = neighbour_limit

    def _index(self, node_id: str) -> int:
        index = self.graph._find(node_id)
        if index < 0:
            raise LookupError(node_id)
        return index

    def NodeInfo(self, node_id: str) -> str:  # noqa: N802
        return render_chunk_at(self.graph, self._index(node_id), DEFAULT_CHUNK_CONFIG)

    def NodeFeature(self, node_id: str, feature: str):  # noqa: N802
        return self.graph.feature_at(self._index(node_id), feature)

    def NeighbourCheck(self, node_id: str, relation: str):  # noqa: N802
        index = self._index(node_id)
        total = self.graph.degree_at(index, relation)
        return self.graph.neighbor_id_list(index, relation, self.limit), total

    def NodeDegree(self, node_id: str, relation: str) -> int:  # noqa: N802
        return self.graph.degree_at(self._index(node_id), relation)


def _stats(seconds: list[float]) -> dict:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"median_us": statistics.median(ordered) * 1e6, "p99_us": p99 * 1e6, "n": len(ordered)}


def _calls(store_source, samples: int, seed: int) -> list[tuple[str, tuple]]:
    """The same primitive calls for every source: sampled nodes, their text feature and first relation."""
    rng = random.Random(seed)
    nodes = [node for batch in store_source.iter_nodes() for node in batch]
    schema = store_source.schema()
    calls = []
    for node_id, node_type, _ in rng.sample(nodes, min(samples, len(nodes))):
        entry = schema.type(node_type)
        relation = entry.relations[0] if entry.relations else None
        calls.append(("NodeInfo", (node_id,)))
        if entry.text_key:
            calls.append(("NodeFeature", (node_id, entry.text_key)))
        if relation:
            calls.append(("NeighbourCheck", (node_id, relation)))
            calls.append(("NodeDegree", (node_id, relation)))
    return calls


def time_primitives(tools, calls: list[tuple[str, tuple]], repeats: int) -> dict:
    timings: dict[str, list[float]] = {}
    clock = time.perf_counter
    for _ in range(repeats):
        for name, args in calls:
            function = getattr(tools, name)
            start = clock()
            function(*args)
            timings.setdefault(name, []).append(clock() - start)
    return {name: _stats(values) for name, values in timings.items()}


def time_sandbox(location: str, calls: list[tuple[str, tuple]], live: bool, repeats: int = 3) -> dict:
    """One snippet making every call, run in a sandbox worker: per-call cost in the worker (store)
    or through the parent (live source)."""
    from glmcot.agents.sandbox import SandboxExecutor, SandboxLimits

    code = "\n".join(f"{name}({', '.join(json.dumps(arg) for arg in args)})" for name, args in calls)
    limits = SandboxLimits(wall_s=120.0, cpu_s=60.0, max_calls=len(calls) + 10, max_code_chars=len(code) + 100)
    source = open_source(location) if live else None
    executor = SandboxExecutor(None if live else location, workers=1, limits=limits, source=source)
    try:
        per_call = []
        for _ in range(repeats):
            result = executor.run(code)
            if not result.ok:
                raise RuntimeError(f"the benchmark snippet failed: {result.error}")
            per_call.append(result.seconds / len(calls))
    finally:
        executor.close()
        if source is not None:
            source.close()
    return {"per_call_us": statistics.median(per_call) * 1e6, "calls": len(calls)}


def scripted_question_latency(dataset: Path, location: str, questions: int, out: Path) -> dict:
    """`glmcot eval --scripted --method glm` on `location`: median question latency and the answers."""
    import subprocess
    import sys

    command = [sys.executable, "-c", "from glmcot.cli import main; main()", "eval", "--questions",
               str(dataset / "questions.jsonl"), "--graph", location, "--method", "glm", "--scripted", "--limit",
               str(questions), "--out", str(out), "--json", "--fresh"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"scripted eval on {location} failed: {(result.stdout + result.stderr)[-1000:]}")
    rows = [json.loads(line) for line in (out / "glm.jsonl").read_text().splitlines()]
    return {"median_latency_s": statistics.median(float(row["latency_s"]) for row in rows),
            "answers": [row["model_answer"] for row in rows],
            "prompt_tokens": sum(int(row.get("prompt_tokens") or 0) for row in rows)}


def run(domain: str, samples: int, repeats: int, questions: int, seed: int, work: Path) -> dict:
    from glmcot.eval.workload import ensure_dataset
    from glmcot.graph.live.db_export import export_graph
    from glmcot.graph.live.servers import start_falkordb, start_oxigraph

    dataset = ensure_dataset(domain, "tiny", 0, work / "cache")
    store = open_source(dataset)
    calls = _calls(store, samples, seed)
    report: dict = {"domain": domain, "samples": samples, "repeats": repeats, "calls": len(calls),
                    "machine": {"cpu": platform.processor() or platform.machine(), "python": platform.python_version()}}
    primitives = {}
    # store: the old direct path and the seam, interleaved twice so drift hits both alike
    for _ in range(2):
        primitives.setdefault("store_direct", []).append(time_primitives(DirectTools(store.graph), calls, repeats))
        primitives.setdefault("store", []).append(time_primitives(GraphTools(store), calls, repeats))
    report["primitives"] = {name: _best(runs) for name, runs in primitives.items()}
    sandbox = {"store": time_sandbox(str(store.graph.directory), calls, live=False)}
    end_to_end = {"store": scripted_question_latency(dataset, str(dataset), questions, work / "eval-store")}
    with start_falkordb() as falkor, start_oxigraph() as oxigraph:
        for name, server in (("falkordb", falkor), ("sparql", oxigraph)):
            url = server.graph_url(domain)
            started = time.perf_counter()
            export_graph(store.graph, url)
            report.setdefault("export_s", {})[name] = time.perf_counter() - started
            source = open_source(url)
            try:
                report["primitives"][name] = time_primitives(GraphTools(source), calls, max(1, repeats // 2))
            finally:
                source.close()
            sandbox[name] = time_sandbox(url, calls, live=True)
            end_to_end[name] = scripted_question_latency(dataset, url, questions, work / f"eval-{name}")
    report["sandbox"] = sandbox
    report["end_to_end"] = end_to_end
    base = end_to_end["store"]["median_latency_s"]
    report["end_to_end_ratio_vs_store"] = {name: value["median_latency_s"] / base for name, value in end_to_end.items()}
    report["same_answers"] = {name: value["answers"] == end_to_end["store"]["answers"] and
                              value["prompt_tokens"] == end_to_end["store"]["prompt_tokens"]
                              for name, value in end_to_end.items()}
    return report


def _best(runs: list[dict]) -> dict:
    """Per primitive, the run with the lower median (the less disturbed of the interleaved runs)."""
    return {name: min((run[name] for run in runs), key=lambda stats: stats["median_us"]) for name in runs[0]}


def print_report(report: dict, say: Callable[[str], None] = print) -> None:
    say(f"graph sources: {report['domain']}, {report['calls']} calls x {report['repeats']} (median / p99 in µs)")
    names = list(report["primitives"])
    say("  primitive      " + "".join(f"{name:>22}" for name in names))
    for primitive in ("NodeInfo", "NodeFeature", "NeighbourCheck", "NodeDegree"):
        cells = []
        for name in names:
            stats = report["primitives"][name].get(primitive)
            cells.append(f"{stats['median_us']:>11.1f} / {stats['p99_us']:>8.1f}" if stats else f"{'-':>22}")
        say(f"  {primitive:<14} " + "".join(cells))
    say("  sandbox per call: " + ", ".join(f"{name} {value['per_call_us']:.0f} µs" for name, value in report["sandbox"].items()))
    say("  scripted GLM question: " + ", ".join(
        f"{name} {value['median_latency_s'] * 1000:.0f} ms (x{report['end_to_end_ratio_vs_store'][name]:.2f})"
        for name, value in report["end_to_end"].items()))
    say(f"  same answers and prompt tokens as the store: {report['same_answers']}")


def main(argv: list[str] | None = None) -> None:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", default="dblp")
    parser.add_argument("--samples", type=int, default=200, help="sampled nodes (4 calls each)")
    parser.add_argument("--repeats", type=int, default=5, help="passes over the calls on the store (half on databases)")
    parser.add_argument("--questions", type=int, default=4, help="scripted questions end to end per source")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write the report as JSON here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="glmcot-sources-bench-") as work:
        report = run(args.domain, args.samples, args.repeats, args.questions, args.seed, Path(work))
    print_report(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
