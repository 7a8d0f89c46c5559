import subprocess
import sys

import numpy as np

from glmcot.graph.tools.chunks import CHUNK_RENDERER_VERSION, ChunkConfig, chunk_key, render_chunk
from glmcot.graph.storage.store import Graph
from glmcot.graph.storage.writer import StoreWriter


def test_chunk_layout(tiny):
    assert render_chunk(tiny, "p3") == (
        "[node p3 | paper]\n"
        "title: Paged Attention\n"
        "year: 2023\n"
        "keywords: none\n"
        "author (3): Ada Lovelace <a1> | Alan Turing <a2> | Grace Hopper <a3>\n"
        "venue (0): none\n"
        "cited_by (2): Graph Chain of Thought <p1> | Vertex Caches for LLMs <p2>\n"
    )


def test_top_k_by_degree_and_truncation(tiny):
    chunk = render_chunk(tiny, "p3", ChunkConfig(top_k=2, max_neighbour_chars=8))
    # a1 has 3 papers, a2 has 2, a3 has 1: the two best connected authors are shown
    assert "author (top 2 of 3): Ada Lov… <a1> | Alan Tu… <a2>\n" in chunk
    assert render_chunk(tiny, "p4").splitlines()[1] == "title: Zürich Graphs ✓"


def test_top_k_by_weight(tmp_path):
    with StoreWriter(tmp_path / "g") as writer:
        writer.add_nodes("n", ["x", "y", "z", "w"], {"name": ["X", "Y", "Z", "W"]})
        writer.add_edges("n", "r", np.array([0, 0, 0]), np.array([1, 2, 3]), weight=np.array([0.1, 0.9, 0.5]))
    chunk = render_chunk(Graph.open(tmp_path / "g"), "x", ChunkConfig(top_k=2))
    assert "r (top 2 of 3): Z <z> | W <w>\n" in chunk


def test_long_values_are_cut_and_whitespace_folded(tmp_path):
    with StoreWriter(tmp_path / "g") as writer:
        writer.add_nodes("doc", ["d"], {"text": ["word " * 500 + "\n\nend"], "tags": [["a", "b"]], "n": [1.5]})
    chunk = render_chunk(Graph.open(tmp_path / "g"), "d", ChunkConfig(max_value_chars=20))
    lines = chunk.splitlines()
    assert lines[1] == "text: word word word word…" and len(lines[1]) <= len("text: ") + 20
    assert lines[2:] == ["tags: a; b", "n: 1.5"]


_SCRIPT = """
import sys
from glmcot.graph.tools.chunks import render_chunk
from glmcot.graph.storage.store import Graph
g = Graph.open(sys.argv[1])
sys.stdout.buffer.write("".join(render_chunk(g, g.node_id(i)) for i in range(g.num_nodes)).encode())
"""


def test_chunks_are_byte_identical_across_processes(tiny_dir):
    graph = Graph.open(tiny_dir)
    here = "".join(render_chunk(graph, graph.node_id(i)) for i in range(graph.num_nodes)).encode()
    outputs = []
    for seed in ("1", "2"):
        result = subprocess.run([sys.executable, "-c", _SCRIPT, str(tiny_dir)], capture_output=True, check=True,
                                env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"})
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1] == here


def test_chunk_key_carries_version_and_store(tiny):
    key = chunk_key(tiny, "p1")
    assert CHUNK_RENDERER_VERSION in key and tiny.store_id in key and "p1" in key
    assert chunk_key(tiny, "p1", ChunkConfig(top_k=3)) != key


def test_hub_ranking_matches_a_full_sort(tmp_path):
    rng = np.random.default_rng(3)
    count = 400
    with StoreWriter(tmp_path / "g") as writer:
        writer.add_nodes("n", [f"n{i}" for i in range(count)], {})
        hub_targets = rng.permutation(np.arange(1, count))
        writer.add_edges("n", "r", np.zeros(count - 1, dtype=np.int64), hub_targets)
        # give the targets many tied degrees: 0..4 extra edges each
        extra = rng.integers(0, 5, count)
        src = np.repeat(np.arange(count), extra)
        writer.add_edges("n", "s", src, rng.integers(0, count, len(src)))
    graph = Graph.open(tmp_path / "g")
    from glmcot.graph.tools.chunks import ranked_neighbours

    chosen, total = ranked_neighbours(graph, 0, "r", 7)
    neighbours = graph.neighbor_indices(0, "r")
    degrees = graph.total_degree(neighbours)
    expected = sorted(range(len(neighbours)), key=lambda p: (-degrees[p], p))[:7]
    assert total == count - 1 and chosen.tolist() == neighbours[expected].tolist()
