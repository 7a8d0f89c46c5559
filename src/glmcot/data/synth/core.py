"""In-memory columnar graph the domain generators fill, plus sampling helpers and writers.

Nodes are held per type (ids and feature columns); edges per (source type, relation) as numpy
arrays of type-local indices, kept in insertion order so a node's neighbour list has a defined
order (the order the store and graph.json keep too). Gold answers are computed from these arrays
(`csr`), never through the graph package.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from glmcot.data.schemas import DomainSchema
from glmcot.files import write_json_atomic

# Named scales: a target edge count (stored adjacency entries); "tiny" is sized by node count.
SCALES: dict[str, int | None] = {"tiny": None, "small": 100_000, "medium": 1_000_000,
                                 "large": 10_000_000}


def resolve_scale(scale: str | int) -> int | None:
    """Return the target edge count for a scale name or number (None for tiny)."""
    if isinstance(scale, int):
        target = scale
    else:
        text = str(scale).strip().lower().replace("_", "")
        if text in SCALES:
            return SCALES[text]
        try:
            target = int(float(text))
        except ValueError:
            raise ValueError(f"unknown scale {scale!r}: use tiny, small, medium, large or a "
                             "number of edges such as 2000000 or 1e7") from None
    if target < 1000:
        raise ValueError(f"scale {target} edges is too small (use at least 1000, or 'tiny')")
    return target


class SynthGraph:
    """Columnar node and edge tables for one synthetic domain graph."""

    def __init__(self, schema: DomainSchema, counts: dict[str, int],
                 progress: Callable[[int], None] | None = None):
        missing = [t for t in schema.node_types if t not in counts]
        if missing:
            raise ValueError(f"no node count for types {missing}")
        self.schema = schema
        self.types = list(schema.node_types)
        self.counts = {t: int(counts[t]) for t in self.types}
        self.offsets: dict[str, int] = {}
        offset = 0
        for t in self.types:
            self.offsets[t] = offset
            offset += self.counts[t]
        self.num_nodes = offset
        self.ids: dict[str, list[str]] = {}
        self.features: dict[str, dict[str, list]] = {}
        self._edges: dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray]]] = {}
        self._csr: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
        self._progress = progress      # called with the number of nodes or edges just added

    # -- building -----------------------------------------------------------------------------
    def set_nodes(self, node_type: str, ids: Sequence[str], features: dict[str, Sequence]) -> None:
        spec = self.schema.node_types[node_type]
        if len(ids) != self.counts[node_type]:
            raise ValueError(f"{node_type}: {len(ids)} ids for {self.counts[node_type]} nodes")
        unknown = set(features) - set(spec.features)
        if unknown:
            raise ValueError(f"{node_type}: features {sorted(unknown)} not in the schema")
        cols = {}
        for name in spec.features:  # schema order, so outputs are stable
            col = list(features.get(name, [None] * len(ids)))
            if len(col) != len(ids):
                raise ValueError(f"{node_type}.{name}: {len(col)} values for {len(ids)} nodes")
            cols[name] = col
        self.ids[node_type] = list(ids)
        self.features[node_type] = cols
        if self._progress:
            self._progress(len(ids))

    def add_edges(self, src_type: str, relation: str, src: np.ndarray, dst: np.ndarray) -> None:
        """Append edges given as type-local indices (dst in the relation's target type)."""
        target = self.schema.relation_target(src_type, relation)
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        if src.shape != dst.shape:
            raise ValueError("src and dst differ in length")
        if len(src) and (src.min() < 0 or src.max() >= self.counts[src_type]
                         or dst.min() < 0 or dst.max() >= self.counts[target]):
            raise ValueError(f"edge index out of range for {src_type}.{relation}")
        self._edges.setdefault((src_type, relation), []).append((src, dst))
        self._csr.pop((src_type, relation), None)
        if self._progress:
            self._progress(len(src))

    def add_both(self, src_type: str, relation: str, src: np.ndarray, dst: np.ndarray,
                 reverse: str | None = None) -> None:
        """Add edges and their reverses (under `reverse`, or the same name on the other end)."""
        target = self.schema.relation_target(src_type, relation)
        self.add_edges(src_type, relation, src, dst)
        self.add_edges(target, reverse or relation, dst, src)

    # -- reading ------------------------------------------------------------------------------
    def relations(self, node_type: str) -> list[str]:
        return list(self.schema.node_types[node_type].relations)

    def edge_arrays(self, src_type: str, relation: str) -> tuple[np.ndarray, np.ndarray]:
        chunks = self._edges.get((src_type, relation), [])
        if not chunks:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        return (np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks]))

    def csr(self, src_type: str, relation: str) -> tuple[np.ndarray, np.ndarray]:
        """(indptr over the source type, neighbour local indices), insertion order per node."""
        key = (src_type, relation)
        if key not in self._csr:
            src, dst = self.edge_arrays(src_type, relation)
            order = np.argsort(src, kind="stable")
            counts = np.bincount(src, minlength=self.counts[src_type])
            indptr = np.zeros(self.counts[src_type] + 1, dtype=np.int64)
            np.cumsum(counts, out=indptr[1:])
            self._csr[key] = (indptr, dst[order])
        return self._csr[key]

    def neighbors(self, src_type: str, relation: str, i: int) -> np.ndarray:
        indptr, dst = self.csr(src_type, relation)
        return dst[indptr[i]:indptr[i + 1]]

    def degrees(self, src_type: str, relation: str) -> np.ndarray:
        indptr, _ = self.csr(src_type, relation)
        return np.diff(indptr)

    def feature(self, node_type: str, name: str, i: int):
        return self.features[node_type][name][i]

    def text(self, node_type: str, i: int) -> str:
        return self.features[node_type][self.schema.text_key(node_type)][i]

    def global_index(self, node_type: str, i: int) -> int:
        return self.offsets[node_type] + int(i)

    def node_id(self, node_type: str, i: int) -> str:
        return self.ids[node_type][int(i)]

    def num_edges(self) -> int:
        return sum(sum(len(c[0]) for c in chunks) for chunks in self._edges.values())

    def edge_counts(self) -> dict[str, int]:
        out = {}
        for t in self.types:
            for rel in self.relations(t):
                out[f"{t}.{rel}"] = sum(len(c[0]) for c in self._edges.get((t, rel), []))
        return out

    def check_unique_ids(self) -> None:
        seen: set[str] = set()
        for t in self.types:
            for node_id in self.ids[t]:
                if node_id in seen:
                    raise ValueError(f"duplicate node id {node_id!r}")
                seen.add(node_id)

    # -- writing ------------------------------------------------------------------------------
    def write_store(self, out_dir: Path, progress: Callable[[int], None] | None = None,
                    source: dict | None = None) -> None:
        """Write the project's store format through glmcot.graph's StoreWriter.

        StoreWriter stamps a random store_id and the wall-clock time into manifest.json; for
        byte-identical output the manifest is rewritten with a content hash as store_id and a
        fixed creation stamp (the generator's source block says so)."""
        from glmcot.graph.storage.writer import StoreWriter

        out_dir = Path(out_dir)
        with StoreWriter(out_dir, source=source) as writer:
            for t in self.types:
                writer.add_nodes(t, self.ids[t], self.features[t])
                writer.set_text_key(t, self.schema.text_key(t))
                if progress:
                    progress(self.counts[t])
            for t in self.types:
                for rel in self.relations(t):
                    target = self.schema.relation_target(t, rel)
                    for src, dst in self._edges.get((t, rel), []):
                        writer.add_edges(t, rel, src + self.offsets[t], dst + self.offsets[target])
                        if progress:
                            progress(len(src))
        _make_manifest_deterministic(out_dir)

    def iter_grbench_json(self) -> Iterator[str]:
        """graph.json text (GRBench layout: "<type>_nodes" -> id -> features, neighbors)."""
        dumps = json.dumps
        yield "{"
        for ti, t in enumerate(self.types):
            yield ("," if ti else "") + f"\n{dumps(t + '_nodes')}: {{"
            names = list(self.features[t])
            cols = [self.features[t][n] for n in names]
            rels = self.relations(t)
            csrs = [self.csr(t, r) for r in rels]
            targets = [self.ids[self.schema.relation_target(t, r)] for r in rels]
            ids = self.ids[t]
            for i in range(self.counts[t]):
                feats = {n: c[i] for n, c in zip(names, cols) if c[i] is not None}
                nbrs = {r: [tid[j] for j in dst[ip[i]:ip[i + 1]]]
                        for r, (ip, dst), tid in zip(rels, csrs, targets)}
                record = dumps({"features": feats, "neighbors": nbrs}, ensure_ascii=False)
                yield ("," if i else "") + f"\n{dumps(ids[i])}: {record}"
            yield "\n}"
        yield "\n}\n"


def _make_manifest_deterministic(store: Path) -> None:
    import hashlib

    path = store / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    digest = hashlib.sha256()
    for file in sorted(p for p in store.rglob("*") if p.is_file() and p.name != "manifest.json"):
        digest.update(str(file.relative_to(store)).encode())
        digest.update(file.read_bytes())
    body = {k: v for k, v in manifest.items() if k not in ("store_id", "created")}
    digest.update(json.dumps(body, sort_keys=True).encode())
    manifest["store_id"] = digest.hexdigest()[:32]
    manifest["created"] = "1970-01-01T00:00:00Z"
    write_json_atomic(path, manifest, indent=1)


# -- sampling helpers ---------------------------------------------------------------------------

def popularity(rng: np.random.Generator, n: int, alpha: float) -> np.ndarray:
    """Zipf-like probabilities over n items (random ranks), so a few items are hubs."""
    ranks = rng.permutation(n).astype(np.float64) + 1.0
    weights = ranks ** (-alpha)
    return weights / weights.sum()


def choose(rng: np.random.Generator, p: np.ndarray, size: int) -> np.ndarray:
    """Draw `size` indices with probabilities p (inverse CDF, fast for large draws)."""
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), len(p) - 1)


def counts_per_node(rng: np.random.Generator, n: int, mean: float, low: int = 0,
                    high: int | None = None, tail: float = 0.0) -> np.ndarray:
    """Per-node edge counts: Poisson around `mean`, optionally with a Pareto tail factor."""
    lam = np.full(n, max(mean - low, 0.0))
    if tail > 0:
        factor = rng.pareto(tail, n) + 1.0
        lam = lam * factor / factor.mean()
    k = rng.poisson(lam) + low
    if high is not None:
        k = np.minimum(k, high)
    return k.astype(np.int64)


def expand(counts: np.ndarray) -> np.ndarray:
    """Source index repeated counts[i] times."""
    return np.repeat(np.arange(len(counts), dtype=np.int64), counts)


def dedupe(src: np.ndarray, dst: np.ndarray, n_dst: int, drop_self: bool = False
           ) -> tuple[np.ndarray, np.ndarray]:
    """Drop repeated (src, dst) pairs, keeping first occurrences in their original order."""
    if drop_self:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    key = src * np.int64(n_dst) + dst
    _, first = np.unique(key, return_index=True)
    first.sort()
    return src[first], dst[first]


def local_targets(rng: np.random.Generator, src: np.ndarray, order: np.ndarray, window: int,
                  p_global: float, pop: np.ndarray | None) -> np.ndarray:
    """For each source (an index into `order`'s node set), a target near it in `order`
    (similar items sit together there) or, with probability p_global, a popular one anywhere."""
    n = len(order)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    offset = rng.integers(-window, window + 1, size=len(src))
    near = order[np.clip(position[src] + offset, 0, n - 1)]
    if pop is None:
        far = rng.integers(0, n, size=len(src))
    else:
        far = choose(rng, pop, len(src))
    return np.where(rng.random(len(src)) < p_global, far, near)


def unique_numeric_ids(rng: np.random.Generator, n: int, start: int, gap: int = 40) -> np.ndarray:
    """n distinct integers from `start` upward in random order (sorted random gaps, shuffled)."""
    values = start + np.cumsum(rng.integers(1, gap, size=n))
    return rng.permutation(values)


def hex_ids(rng: np.random.Generator, n: int, nbytes: int = 12) -> list[str]:
    raw = rng.bytes(n * nbytes).hex()
    width = 2 * nbytes
    return [raw[i * width:(i + 1) * width] for i in range(n)]


def make_unique(names: list[str]) -> list[str]:
    """Number repeated names ("X", "X 2", "X 3") so a generator can insist on distinct names."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        k = seen.get(name, 0) + 1
        seen[name] = k
        out.append(name if k == 1 else f"{name} {k}")
    return out
