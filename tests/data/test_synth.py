"""Synthetic graphs: determinism, schema, structure, both output formats and the importer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from glmcot.data.schemas import DOMAINS, load_schema
from glmcot.data.synth import build_graph, resolve_scale
from glmcot.data.synth.generate import SynthConfig, generate


def _digest(root):
    import hashlib

    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_gives_byte_identical_files(tmp_path, tiny_datasets):
    # tiny_datasets built dblp with seed 0 in both formats; build it again elsewhere.
    generate(SynthConfig("dblp", "tiny", 0, 10, ("store", "grbench")), tmp_path / "again")
    first, second = _digest(tiny_datasets["dblp"]), _digest(tmp_path / "again")
    assert first == second
    assert {"graph.json", "questions.jsonl", "meta.json", "graph/manifest.json"} <= set(first)


def test_other_seed_differs(tmp_path):
    generate(SynthConfig("legal", "tiny", 1, 2), tmp_path / "a")
    generate(SynthConfig("legal", "tiny", 2, 2), tmp_path / "b")
    a, b = _digest(tmp_path / "a"), _digest(tmp_path / "b")
    assert a["questions.jsonl"] != b["questions.jsonl"]
    assert a["graph/nodes/ids.blob"] != b["graph/nodes/ids.blob"]


@pytest.mark.parametrize("domain", DOMAINS)
def test_store_has_the_schema(domain, tiny_datasets):
    from glmcot.graph.storage.store import Graph

    schema = load_schema(domain)
    graph = Graph.open(tiny_datasets[domain] / "graph")
    assert graph.node_types == list(schema.node_types)
    assert 700 <= graph.num_nodes <= 1500            # tiny: about 1k nodes
    for name, spec in schema.node_types.items():
        assert set(graph.feature_names(name)) == set(spec.features), name
        assert set(graph.relation_names(name)) == set(spec.relations), name
        assert graph.text_key(name) == spec.text_key
    meta = json.loads((tiny_datasets[domain] / "meta.json").read_text())
    assert meta["domain"] == domain and meta["counts"]["nodes"] == graph.num_nodes
    assert meta["counts"]["edges"] == graph.num_edges


@pytest.mark.parametrize("domain", DOMAINS)
def test_graph_json_matches_store_through_the_importer(domain, tiny_datasets, tmp_path):
    from glmcot.graph.importers.importer import import_graph_json
    from glmcot.graph.storage.store import Graph

    root = tiny_datasets[domain]
    raw = json.loads((root / "graph.json").read_text())
    assert sorted(raw) == sorted(f"{t}_nodes" for t in load_schema(domain).node_types)
    import_graph_json(root / "graph.json", tmp_path / "imported")
    direct, imported = Graph.open(root / "graph"), Graph.open(tmp_path / "imported")
    assert imported.num_nodes == direct.num_nodes and imported.num_edges == direct.num_edges
    rng = np.random.default_rng(0)
    for index in rng.choice(direct.num_nodes, 60, replace=False):
        node = direct.node_id(int(index))
        node_type = direct.node_type(node)
        record = raw[f"{node_type}_nodes"][node]
        for relation in direct.relation_names(node_type):
            assert direct.neighbors(node, relation) == imported.neighbors(node, relation) \
                == record["neighbors"][relation]
        for feature, value in record["features"].items():
            assert direct.feature(node, feature) == imported.feature(node, feature) == value


@pytest.mark.parametrize("domain", DOMAINS)
def test_structure_is_heavy_tailed_and_consistent(domain):
    graph = build_graph(domain, "small", 0)
    graph.check_unique_ids()
    schema = graph.schema
    hubs = 0
    for t in graph.types:
        for rel in graph.relations(t):
            degrees = graph.degrees(t, rel)
            if degrees.mean() >= 1 and degrees.max() >= 8 * degrees.mean():
                hubs += 1
            src, dst = graph.edge_arrays(t, rel)
            target = schema.relation_target(t, rel)
            assert len(np.unique(src * graph.counts[target] + dst)) == len(src), f"repeated edge {t}.{rel}"
    assert hubs >= 2, "expected a few hub nodes (heavy-tailed degrees)"
    # reverse relations hold the same edges
    pairs = {"dblp": [("paper", "author", "author", "paper"), ("paper", "reference", "paper", "cited_by")],
             "amazon": [("item", "brand", "brand", "item")],
             "goodreads": [("book", "series", "series", "book")],
             "biomedical": [("Compound", "Compound-treats-Disease", "Disease", "Compound-treats-Disease")],
             "legal": [("docket", "court", "court", "docket"), ("opinion", "reference", "opinion", "cited_by")]}
    for a, ra, b, rb in pairs[domain]:
        s1, d1 = graph.edge_arrays(a, ra)
        s2, d2 = graph.edge_arrays(b, rb)
        assert sorted(zip(s1.tolist(), d1.tolist())) == sorted(zip(d2.tolist(), s2.tolist()))


def test_texts_have_near_duplicates():
    graph = build_graph("dblp", "small", 0)
    titles = graph.features["paper"]["title"]
    prefixes = {}
    for title in titles:
        prefixes.setdefault(" ".join(title.split()[:4]), set()).add(title)
    assert sum(len(v) > 1 for v in prefixes.values()) > 50
    assert len(set(titles)) > 0.9 * len(titles)


def test_scale_names_and_errors(tmp_path):
    assert resolve_scale("tiny") is None
    assert resolve_scale("large") == 10_000_000
    assert resolve_scale("3e6") == 3_000_000
    with pytest.raises(ValueError, match="unknown scale"):
        resolve_scale("huge")
    with pytest.raises(ValueError, match="too small"):
        resolve_scale("10")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="--force"):
        generate(SynthConfig("dblp"), tmp_path / "busy")
    assert (tmp_path / "busy" / "keep.txt").read_text() == "x"
    with pytest.raises(ValueError, match="unknown format"):
        SynthConfig("dblp", formats=("csv",))


def test_force_replaces_only_generator_outputs(tmp_path):
    out = tmp_path / "ds"
    generate(SynthConfig("amazon", "tiny", 0, 1), out)
    generate(SynthConfig("amazon", "tiny", 1, 1), out, force=True)
    assert json.loads((out / "meta.json").read_text())["seed"] == 1
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="did not write"):
        generate(SynthConfig("amazon", "tiny", 2, 1), out, force=True)
    assert (out / "notes.txt").read_text() == "mine"


def test_wordings_split_seen_from_held_out(tmp_path):
    """`seen` never phrases a question with a template's last wording, `held-out` only with it."""
    from glmcot.data.templates.base import is_held_out_wording, wordings

    made = {}
    for which in ("seen", "held-out"):
        generate(SynthConfig("dblp", seed=3, questions_per_template=3, wordings=which), tmp_path / which)
        made[which] = [json.loads(line) for line in (tmp_path / which / "questions.jsonl").read_text().splitlines()]
    held = [is_held_out_wording("dblp", r["template"], r["params"], r["question"]) for r in made["held-out"]]
    seen = [is_held_out_wording("dblp", r["template"], r["params"], r["question"]) for r in made["seen"]]
    assert all(held) and not any(seen)
    assert all(len(wordings("dblp")[r["template"]]) >= 2 for r in made["seen"])
    with pytest.raises(ValueError, match="unknown wordings 'some'"):
        SynthConfig("dblp", wordings="some")
