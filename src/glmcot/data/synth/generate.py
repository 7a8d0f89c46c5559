"""`glmcot data synth`: build a domain graph, sample template questions, write the dataset."""

from __future__ import annotations

import importlib
import os
import shutil
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from glmcot.data.questions import QUESTIONS_FORMAT, QuestionRecord, write_questions
from glmcot.data.schemas import DOMAINS, canonical_domain, load_schema
from glmcot.data.synth.core import SynthGraph, resolve_scale
from glmcot.files import write_json_atomic

GENERATOR_VERSION = "1"
_OUTPUTS = ("graph", "graph.json", "questions.jsonl", "meta.json", ".graph.json.tmp", ".meta.json.tmp",
            ".questions.jsonl.tmp")


@dataclass
class SynthConfig:
    domain: str
    scale: str | int = "tiny"
    seed: int = 0
    questions_per_template: int = 10
    formats: tuple[str, ...] = ("store",)      # "store" (graph/) and/or "grbench" (graph.json)
    wordings: str = "all"                        # all, seen (every wording but the last) or held-out

    def __post_init__(self):
        self.domain = canonical_domain(self.domain)
        unknown = set(self.formats) - {"store", "grbench"}
        if unknown or not self.formats:
            raise ValueError(f"unknown format(s) {sorted(unknown)}; use store and/or grbench")
        if self.questions_per_template < 0:
            raise ValueError("questions per template must be >= 0")
        from glmcot.data.templates.base import Wordings

        try:
            self.wordings = Wordings(self.wordings).value
        except ValueError:
            raise ValueError(f"unknown wordings {self.wordings!r}; use {', '.join(w.value for w in Wordings)}") from None


def _seed(seed: int, domain: str, stream: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), DOMAINS.index(domain), stream])


def units_for(domain: str, scale: str | int) -> int:
    module = importlib.import_module(f"glmcot.data.synth.{domain}")
    target = resolve_scale(scale)
    if target is None:
        return module.TINY_UNITS
    # Edges per unit drift a little with scale (degree caps, dedupe): aim 2 % high so a scale
    # such as large (1e7) yields at least its edge count.
    return max(module.TINY_UNITS, int(round(1.02 * target / module.EDGES_PER_UNIT)))


def build_graph(domain: str, scale: str | int = "tiny", seed: int = 0,
                units: int | None = None, progress: Callable[[int], None] | None = None) -> SynthGraph:
    """The domain graph at a scale; `units` (papers, items, books, nodes, opinions) overrides
    the scale, e.g. for graphs smaller than tiny in tests."""
    domain = canonical_domain(domain)
    module = importlib.import_module(f"glmcot.data.synth.{domain}")
    return module.build(_seed(seed, domain, 0), units or units_for(domain, scale), progress)


def expected_size(domain: str, scale: str | int) -> int:
    """Rough nodes + edges a build adds, for progress bars."""
    domain = canonical_domain(domain)
    module = importlib.import_module(f"glmcot.data.synth.{domain}")
    units = units_for(domain, scale)
    return int(units * (module.EDGES_PER_UNIT + 1.6))


def make_questions(graph: SynthGraph, seed: int, per_template: int,
                   progress: Callable[[str], None] | None = None, wordings: str = "all") -> list[QuestionRecord]:
    """Sample `per_template` questions of every implemented template (fewer when the graph has
    too few well-posed anchors), numbered in template order like GRBench's qid blocks."""
    from glmcot.data.templates import template_set
    from glmcot.data.templates.base import Ctx, Wordings, sample_template, to_records

    domain = graph.schema.domain
    sampled = []
    for template in template_set(domain).templates:
        # One generator per template, so adding a template leaves the others unchanged.
        rng = np.random.default_rng([int(seed), DOMAINS.index(domain), 1,
                                     zlib.crc32(template.template.encode())])
        sampled.extend(sample_template(template, Ctx(graph, rng), domain, per_template, which=Wordings(wordings)))
        if progress:
            progress(template.template)
    return to_records(domain, sampled)


def generate(config: SynthConfig, out_dir: str | os.PathLike, force: bool = False,
             progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Write graph/ and/or graph.json, questions.jsonl and meta.json into out_dir.

    progress(stage, done, total) is called as work advances. Returns the meta dict."""
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        if not force:
            raise FileExistsError(f"{out} exists and is not empty; pass --force to replace it")
        unknown = sorted(p.name for p in out.iterdir() if p.name not in _OUTPUTS)
        if unknown:
            raise FileExistsError(f"{out} holds files this generator did not write ({', '.join(unknown[:5])}); "
                                  "refusing to replace it, choose another --out")
        for name in _OUTPUTS:
            target = out / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
    out.mkdir(parents=True, exist_ok=True)
    report = progress or (lambda stage, done, total: None)
    expected = expected_size(config.domain, config.scale)
    built = [0]

    def on_build(n: int) -> None:
        built[0] += n
        report("graph", min(built[0], expected), expected)
    report("graph", 0, expected)
    graph = build_graph(config.domain, config.scale, config.seed, progress=on_build)
    graph.check_unique_ids()
    report("graph", expected, expected)
    templates = len(_template_count(config.domain))
    done = [0]

    def on_template(_name: str) -> None:
        done[0] += 1
        report("questions", done[0], templates)

    records = make_questions(graph, config.seed, config.questions_per_template, on_template, config.wordings)
    if "store" in config.formats:
        total = graph.num_nodes + graph.num_edges()
        written = [0]

        def on_store(n: int) -> None:
            written[0] += n
            report("store", written[0], total)
        graph.write_store(out / "graph", on_store, source={
            "generator": "glmcot.data.synth", "generator_version": GENERATOR_VERSION,
            "domain": config.domain, "scale": str(config.scale), "seed": config.seed,
            "created": "fixed for byte-identical output"})
    if "grbench" in config.formats:
        tmp = out / ".graph.json.tmp"
        with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
            for k, chunk in enumerate(graph.iter_grbench_json()):
                handle.write(chunk)
                if k % 20000 == 0:
                    report("graph.json", k, graph.num_nodes)
        os.replace(tmp, out / "graph.json")
        report("graph.json", graph.num_nodes, graph.num_nodes)
    write_questions(out / "questions.jsonl", records)
    per_template: dict[str, int] = {}
    for r in records:
        per_template[r.template] = per_template.get(r.template, 0) + 1
    meta = {
        "format": QUESTIONS_FORMAT, "generator": "glmcot.data.synth",
        "generator_version": GENERATOR_VERSION, "domain": config.domain,
        "scale": str(config.scale), "seed": config.seed,
        "questions_per_template": config.questions_per_template,
        "wordings": config.wordings,
        "outputs": sorted(config.formats),
        "counts": {
            "nodes": graph.num_nodes, "edges": graph.num_edges(),
            "nodes_per_type": dict(graph.counts), "edges_per_relation": graph.edge_counts(),
            "questions": len(records), "questions_per_template": per_template,
        },
        "definition": load_schema(config.domain).definition,
    }
    write_json_atomic(out / "meta.json", meta, indent=1)
    return meta


def _template_count(domain: str):
    from glmcot.data.templates import template_set
    return template_set(domain).templates
