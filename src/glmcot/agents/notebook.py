"""The notebook: the facts a question has gathered, as P-II segments.

It keeps only new facts: each snippet's printed output (a keyless segment) and the vertex chunks
of the nodes the snippet touched (keyed `chunk_key(node)`, so the engine reuses their KV across
agents and questions), each node once. Prompt order: P-I instructions, notebook in the order facts
arrived, P-IV transient text.
"""

from __future__ import annotations

from glmcot.llm import Level, Segment
from glmcot.agents.formats import render_fact


class Notebook:
    def __init__(self, chunk_key=None):
        self._chunk_key = chunk_key or (lambda node_id: f"vertex:{node_id}")
        self._segments: list[Segment] = []
        self._nodes: set[str] = set()
        self._facts: list[tuple[str, str]] = []

    def __len__(self) -> int:
        return len(self._segments)

    @property
    def facts(self) -> list[tuple[str, str]]:
        return list(self._facts)

    @property
    def nodes(self) -> list[str]:
        return [s.key for s in self._segments if s.key]

    def add(self, missing: str, output: str, chunks: list[tuple[str, str]]) -> list[Segment]:
        """Adds one snippet's result; returns the segments that were new."""
        added: list[Segment] = []
        for node_id, text in chunks:
            if node_id in self._nodes:
                continue
            self._nodes.add(node_id)
            text = text if text.endswith("\n") else text + "\n"
            added.append(Segment(text, Level.NOTEBOOK, self._chunk_key(node_id, text)))
        fact = (missing.strip(), output.strip())
        if fact not in self._facts:
            self._facts.append(fact)
            added.append(Segment(render_fact(len(self._facts), fact[0], fact[1]), Level.NOTEBOOK, None))
        self._segments.extend(added)
        return added

    def segments(self) -> list[Segment]:
        if not self._segments:
            return [Segment("Notebook: (empty)\n", Level.NOTEBOOK, None)]
        return [Segment("Notebook:\n", Level.NOTEBOOK, None)] + list(self._segments)
