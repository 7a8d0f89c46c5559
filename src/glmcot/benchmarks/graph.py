"""Graph store and primitives benchmark.

Builds random heavy-tailed DBLP-shaped graphs (paper/author/venue; author, venue, reference and
cited_by relations) with StoreWriter at two sizes and measures: topology bytes/edge, bytes on
disk, build time, open time (fresh process), neighbour lookup, NodeDegree, NodeFeature, NodeInfo
(vertex chunk) latencies, and RetrieveNode (MiniLM query encoding + FAISS flat/HNSW/IVF search,
cache hit). At the small size it also writes the graph as GRBench graph.json and compares with
the Graph-CoT way of holding a graph (json.load into dicts): load time, memory, lookup latency,
and times our streaming importer on the same file.

    python -m glmcot.benchmarks.graph                 # 10^6 and 10^7 edges (about 3 minutes on 2 cores)
    python -m glmcot.benchmarks.graph --quick         # 10^5 and 10^6 edges
    python -m glmcot.benchmarks.graph --out runs/bench/graph.json

RetrieveNode search is timed over random unit vectors standing in for node embeddings (embedding
10^5+ node texts with MiniLM on 2 CPU cores would take many minutes); the query embedding is real.
"""

from __future__ import annotations

from glmcot.offline import stay_offline

import argparse
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from glmcot.files import write_json_atomic
from glmcot.graph.tools.primitives import GraphTools
from glmcot.graph.storage.store import Graph
from glmcot.graph.storage.writer import StoreWriter

WORDS = (
    "graph neural learning language model retrieval attention cache scalable query reasoning "
    "distributed index vertex chunk serving efficient sparse dense transformer knowledge"
).split()


def heavy_tailed(rng: np.random.Generator, count: int, size: int, skew: float) -> np.ndarray:
    """Indices in [0, size) with a power-law popularity (a few hubs, a long tail), hubs spread out."""
    raw = (size * rng.random(count) ** skew).astype(np.int64)
    return rng.permutation(size)[raw]


def texts(prefix: str, count: int, rng: np.random.Generator) -> list[str]:
    picks = rng.integers(0, len(WORDS), size=(count, 3)).tolist()
    return [f"{prefix} {i}: {WORDS[a]} {WORDS[b]} {WORDS[c]}" for i, (a, b, c) in enumerate(picks)]


def generate(out: Path, edges: int, seed: int = 0) -> dict:
    """A DBLP-shaped graph with about ``edges`` edges; returns sizes and build time."""
    rng = np.random.default_rng(seed)
    papers = max(edges // 10, 10)
    authors = max(papers // 2, 5)
    venues = max(papers // 1000, 2)
    started = time.perf_counter()
    with StoreWriter(out, overwrite=True, source={"generator": "glmcot.benchmarks.graph", "seed": seed}) as writer:
        writer.add_nodes(
            "paper",
            [f"{i:024x}" for i in range(papers)],
            {"title": texts("Paper", papers, rng), "year": rng.integers(1990, 2026, papers)},
        )
        writer.add_nodes("author", [f"a{i}" for i in range(authors)], {"name": texts("Author", authors, rng)})
        writer.add_nodes("venue", [f"pub_{i}" for i in range(venues)], {"name": texts("Venue", venues, rng)})
        paper0, author0, venue0 = 0, papers, papers + authors
        # 3 authors per paper (popular authors write many), 2 references per paper (popular papers
        # are cited a lot), both stored in both directions as GRBench does.
        src = np.repeat(np.arange(papers), 3)
        dst = heavy_tailed(rng, len(src), authors, 2.5)
        writer.add_edges("paper", "author", paper0 + src, author0 + dst)
        writer.add_edges("author", "paper", author0 + dst, paper0 + src)
        writer.add_edges("paper", "venue", paper0 + np.arange(papers), venue0 + heavy_tailed(rng, papers, venues, 2.0))
        src = np.repeat(np.arange(papers), 2)
        dst = heavy_tailed(rng, len(src), papers, 3.0)
        writer.add_edges("paper", "reference", paper0 + src, paper0 + dst)
        writer.add_edges("paper", "cited_by", paper0 + dst, paper0 + src)
    seconds = time.perf_counter() - started
    graph = Graph.open(out)
    return {"nodes": graph.num_nodes, "edges": graph.num_edges, "build_s": seconds}


def percentiles(samples_ns: list[int]) -> dict:
    values = np.asarray(samples_ns, dtype=np.float64) / 1000.0
    return {"p50_us": float(np.percentile(values, 50)), "p99_us": float(np.percentile(values, 99)),
            "mean_us": float(values.mean())}


def timed(call, arguments: list[tuple]) -> dict:
    for args in arguments[:100]:
        call(*args)  # warm the pages and lazy column loads
    samples = []
    clock = time.perf_counter_ns
    for args in arguments:
        begin = clock()
        call(*args)
        samples.append(clock() - begin)
    return percentiles(samples)


_OPEN_SCRIPT = """
import json, sys, time
begin = time.perf_counter()
from glmcot.graph.storage.store import Graph
imported = time.perf_counter()
g = Graph.open(sys.argv[1])
opened = time.perf_counter()
g.neighbors(g.node_id(0), "author")
first = time.perf_counter()
print(json.dumps({"open_s": opened - imported, "first_lookup_s": first - opened}))
"""


def open_in_fresh_process(store: Path) -> dict:
    runs = []
    for _ in range(3):
        output = subprocess.run([sys.executable, "-c", _OPEN_SCRIPT, str(store)], check=True,
                                capture_output=True, text=True).stdout
        runs.append(json.loads(output))
    return {"open_s": min(run["open_s"] for run in runs), "first_lookup_s": min(run["first_lookup_s"] for run in runs)}


def measure_store(store: Path, samples: int, seed: int = 1) -> dict:
    graph = Graph.open(store)
    info = graph.info()
    rng = np.random.default_rng(seed)
    paper_start, paper_stop = graph.type_range("paper")
    author_start, author_stop = graph.type_range("author")
    papers = rng.integers(paper_start, paper_stop, samples)
    authors = rng.integers(author_start, author_stop, samples)
    paper_ids = graph.node_ids(papers)
    author_ids = graph.node_ids(authors)
    tools = GraphTools(graph, neighbour_limit=50)
    result = {
        "nodes": graph.num_nodes,
        "edges": graph.num_edges,
        "topology_bytes_per_edge": info["topology_bytes_per_edge"],
        "bytes_on_disk": info["bytes_on_disk"],
        "bytes_on_disk_per_edge": info["bytes_on_disk"] / graph.num_edges,
        **open_in_fresh_process(store),
        "index_of_id": timed(graph.index, [(i,) for i in paper_ids]),
        "neighbor_indices": timed(graph.neighbor_indices, [(int(i), "author") for i in papers]),
        "neighbors_by_id": timed(graph.neighbors, [(i, "author") for i in paper_ids]),
        "NeighbourCheck_author_papers": timed(tools.NeighbourCheck, [(i, "paper") for i in author_ids]),
        "NodeDegree": timed(tools.NodeDegree, [(i, "cited_by") for i in paper_ids]),
        "NodeFeature_title": timed(tools.NodeFeature, [(i, "title") for i in paper_ids]),
        "NodeFeature_year": timed(tools.NodeFeature, [(i, "year") for i in paper_ids]),
        "NodeInfo_chunk": timed(tools.NodeInfo, [(i,) for i in paper_ids[: max(samples // 10, 100)]]),
    }
    degrees = np.diff(np.asarray(graph._relation("author", "paper").indptr))
    result["max_author_papers"] = int(degrees.max())
    return result


def graphcot_peer(store: Path, workdir: Path, samples: int) -> dict:
    """Graph-CoT's representation: graph.json loaded whole into dicts. Also times our importer."""
    from glmcot.graph.importers.importer import import_graph_json

    from glmcot.graph.importers.export import export_graph_json

    graph = Graph.open(store)
    path = export_graph_json(graph, workdir / "graph.json")
    json_bytes = path.stat().st_size
    script = """
import json, os, random, sys, time
def rss():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = rss()
begin = time.perf_counter()
graph = json.load(open(sys.argv[1]))
load = time.perf_counter() - begin
index = {}
for nodes in graph.values():
    index.update(nodes)
after = rss()
papers = list(graph["paper_nodes"])
random.seed(1)
ids = [random.choice(papers) for _ in range(int(sys.argv[2]))]
samples = []
for node_id in ids:
    t = time.perf_counter_ns()
    str(index[node_id]["neighbors"]["author"])
    samples.append(time.perf_counter_ns() - t)
samples.sort()
print(json.dumps({"load_s": load, "rss_bytes": after - before,
                  "neighbors_p50_us": samples[len(samples) // 2] / 1000}))
"""
    peer = json.loads(subprocess.run([sys.executable, "-c", script, str(path), str(samples)], check=True,
                                     capture_output=True, text=True).stdout)
    started = time.perf_counter()
    imported = import_graph_json(path, workdir / "imported", overwrite=True)
    import_s = time.perf_counter() - started
    ours = open_in_fresh_process(workdir / "imported")
    return {
        "graph_json_bytes": json_bytes,
        "graphcot_json_load_s": peer["load_s"],
        "graphcot_dict_rss_bytes": peer["rss_bytes"],
        "graphcot_dict_bytes_per_edge": peer["rss_bytes"] / graph.num_edges,
        "graphcot_neighbors_p50_us": peer["neighbors_p50_us"],
        "import_s": import_s,
        "import_mb_per_s": json_bytes / import_s / 1e6,
        "imported_edges": imported.edges,
        "store_open_s": ours["open_s"],
        "open_speedup_vs_json_load": peer["load_s"] / max(ours["open_s"], 1e-9),
    }


def measure_retrieval(sizes: list[int], queries: int, torch_threads: int = 1) -> list[dict]:
    import faiss

    from glmcot.graph.index.retrieval import IndexConfig, MiniLMEmbedder, RetrieveNodeCache, _make_index

    # query_threads 1 is the embedder's default for small batches (see SentenceTransformerEmbedder)
    embedder = MiniLMEmbedder(query_threads=torch_threads or None)
    texts_ = [f"the paper about {WORDS[i % len(WORDS)]} {WORDS[(3 * i) % len(WORDS)]} number {i}" for i in range(queries)]
    embedder.encode(texts_[:8])
    encode = timed(lambda text: embedder.encode([text]), [(t,) for t in texts_])
    vectors_q = embedder.encode(texts_)
    cache = RetrieveNodeCache()
    for text in texts_:
        cache.put(text, "x")
    hit = timed(lambda text: cache.get_or_compute(text, lambda _: "x"), [(t,) for t in texts_])
    rows = []
    # HNSW construction on random 384-d vectors is slow on 2 cores (about 2 minutes at 10^5), so
    # it is timed at a small size only; its search latency grows roughly with log(n).
    plan: dict[int, list[str]] = {min(sizes[0], 20_000): ["hnsw"]}
    for size in sizes:
        plan.setdefault(size, []).extend(["flat", "ivf"])
    for size, kinds in plan.items():
        rng = np.random.default_rng(size)
        base = rng.standard_normal((size, embedder.dim), dtype=np.float32)
        base /= np.linalg.norm(base, axis=1, keepdims=True)
        for kind in kinds:
            started = time.perf_counter()
            faiss.omp_set_num_threads(os.cpu_count() or 1)
            index = _make_index(base, IndexConfig(kind=kind, ivf_nlist=int(np.sqrt(size))))
            build = time.perf_counter() - started
            faiss.omp_set_num_threads(1)  # per-query latency on one core, as a busy server sees it
            search = timed(lambda q: index.search(q, 1), [(vectors_q[i : i + 1],) for i in range(len(vectors_q))])
            rows.append({"vectors": size, "index": kind, "build_s": build, "search": search,
                         "retrieve_node_p50_us": encode["p50_us"] + search["p50_us"]})
            del index
        del base
        gc.collect()
    return [{"query_encode": encode, "cache_hit": hit, "indexes": rows, "torch_threads": torch_threads}]


def print_table(results: dict) -> None:
    print(f"\nGraph store ({results['date']}, {results['machine']})")
    header = ("edges", "nodes", "topo B/edge", "disk B/edge", "build s", "open s", "index(id) p50",
              "nbr idx p50", "nbr(id) p50", "NeighbourCheck p50", "NodeDegree p50", "NodeFeature p50", "NodeInfo p50")
    print(" | ".join(header))
    for row in results["stores"]:
        print(" | ".join([
            f"{row['edges']:,}", f"{row['nodes']:,}", f"{row['topology_bytes_per_edge']:.2f}",
            f"{row['bytes_on_disk_per_edge']:.2f}", f"{row['build_s']:.1f}", f"{row['open_s'] * 1000:.1f} ms",
            f"{row['index_of_id']['p50_us']:.2f} us", f"{row['neighbor_indices']['p50_us']:.2f} us",
            f"{row['neighbors_by_id']['p50_us']:.2f} us", f"{row['NeighbourCheck_author_papers']['p50_us']:.2f} us",
            f"{row['NodeDegree']['p50_us']:.2f} us", f"{row['NodeFeature_title']['p50_us']:.2f} us",
            f"{row['NodeInfo_chunk']['p50_us']:.1f} us",
        ]))
    peer = results.get("graphcot_peer")
    if peer:
        print(f"\nvs Graph-CoT dicts at {results['stores'][0]['edges']:,} edges (graph.json {peer['graph_json_bytes'] / 1e6:.1f} MB):")
        print(f"  load: json.load {peer['graphcot_json_load_s']:.2f} s vs Graph.open {peer['store_open_s'] * 1000:.1f} ms "
              f"({peer['open_speedup_vs_json_load']:.0f}x)")
        ours = results["stores"][0]
        print(f"  memory: dicts {peer['graphcot_dict_bytes_per_edge']:.0f} B/edge RSS vs store "
              f"{ours['bytes_on_disk_per_edge']:.1f} B/edge on disk (mmap) "
              f"({peer['graphcot_dict_bytes_per_edge'] / ours['bytes_on_disk_per_edge']:.1f}x)")
        print(f"  neighbour list by id: dict {peer['graphcot_neighbors_p50_us']:.2f} us vs store "
              f"{ours['neighbors_by_id']['p50_us']:.2f} us p50")
        print(f"  streaming import: {peer['import_s']:.1f} s ({peer['import_mb_per_s']:.1f} MB/s)")
    retrieval = results.get("retrieval")
    if retrieval:
        block = retrieval[0]
        print(f"\nRetrieveNode: MiniLM query encode p50 {block['query_encode']['p50_us'] / 1000:.2f} ms "
              f"(torch threads {block['torch_threads'] or 'default'}), "
              f"cache hit p50 {block['cache_hit']['p50_us']:.2f} us")
        print("vectors | index | build s | search p50 | search p99 | RetrieveNode p50 (encode + search)")
        for row in block["indexes"]:
            print(f"{row['vectors']:,} | {row['index']} | {row['build_s']:.2f} | {row['search']['p50_us']:.1f} us | "
                  f"{row['search']['p99_us']:.1f} us | {row['retrieve_node_p50_us'] / 1000:.2f} ms")


def main(argv: list[str] | None = None) -> None:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10^5 and 10^6 edges instead of 10^6 and 10^7")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--workdir", type=Path, default=None, help="where to build the stores (default: a temp dir)")
    parser.add_argument("--samples", type=int, default=20_000, help="lookups timed per measurement")
    parser.add_argument("--no-retrieval", action="store_true", help="skip the RetrieveNode measurements")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch threads for encoding one query (default 1, as the library; 0: torch's default)")
    args = parser.parse_args(argv)

    sizes = [10**5, 10**6] if args.quick else [10**6, 10**7]
    vector_sizes = [10**4, 10**5] if args.quick else [10**5, 5 * 10**5]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="glmcot-graph-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict = {
        "benchmark": "graph",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, python {platform.python_version()}",
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "stores": [],
    }
    try:
        for size in sizes:
            store = workdir / f"store-{size}"
            print(f"building a {size:,}-edge graph ...", flush=True)
            built = generate(store, size)
            row = {**built, **measure_store(store, args.samples)}
            results["stores"].append(row)
            if size == sizes[0]:
                print("Graph-CoT peer and importer on the small graph ...", flush=True)
                results["graphcot_peer"] = graphcot_peer(store, workdir, args.samples)
            shutil.rmtree(store)
            gc.collect()
        if not args.no_retrieval:
            print("RetrieveNode ...", flush=True)
            results["retrieval"] = measure_retrieval(vector_sizes, queries=100, torch_threads=args.torch_threads)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print_table(results)
    if args.out:
        write_json_atomic(args.out, results, indent=1)
        print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
