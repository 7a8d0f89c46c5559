"""An in-memory index of node ids for importers: id strings to global indices, vectorised.

Importers that read nodes before edges (tables, triples) collect every id once, then resolve
edge endpoints in batches. Ids live in one UTF-8 blob; lookups hash a batch with ``hash_ids``,
binary-search the sorted hashes and compare the id bytes with numpy, so a batch of a million
endpoints costs a few numpy passes, not a million dictionary probes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from glmcot.graph.storage.idhash import find_duplicate, hash_ids
from glmcot.graph.storage.layout import ENCODING, ENCODING_ERRORS, offsets_from_lengths


def encode_ids(ids: list[str]) -> tuple[bytes, np.ndarray]:
    """Concatenated UTF-8 bytes of ``ids`` and each id's byte length."""
    joined = "".join(ids)
    if joined.isascii():  # the usual case: byte lengths are string lengths
        return joined.encode("ascii"), np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    encoded = [text.encode(ENCODING, ENCODING_ERRORS) for text in ids]
    return b"".join(encoded), np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))


@dataclass
class IdIndex:
    """Ids in global index order, their sorted hashes, and the index of each sorted hash."""

    blob: bytes
    offsets: np.ndarray
    sorted_hashes: np.ndarray
    order: np.ndarray

    @classmethod
    def build(cls, blob: bytes, lengths: np.ndarray) -> IdIndex:
        offsets = offsets_from_lengths(np.asarray(lengths, dtype=np.int64))
        hashes = hash_ids(blob, offsets)
        order = np.argsort(hashes, kind="stable")
        return cls(blob, offsets, hashes[order], order)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def id_at(self, index: int) -> str:
        return self.blob[self.offsets[index] : self.offsets[index + 1]].decode(ENCODING, ENCODING_ERRORS)

    def duplicate(self) -> tuple[int, int] | None:
        """Two indices holding the same id, or None."""
        return find_duplicate(self.sorted_hashes, self.order, lambda index: self.blob[self.offsets[index] : self.offsets[index + 1]])

    def resolve_strings(self, ids: list[str]) -> np.ndarray:
        blob, lengths = encode_ids(ids)
        return self.resolve(blob, lengths)

    def resolve(self, blob: bytes, lengths: np.ndarray) -> np.ndarray:
        """Global index of each id in ``blob`` (``lengths`` bytes each), or -1 for an unknown id."""
        count = len(lengths)
        result = np.full(count, -1, dtype=np.int64)
        size = len(self.sorted_hashes)
        if not count or not size:
            return result
        query_offsets = offsets_from_lengths(np.asarray(lengths, dtype=np.int64))
        query = np.frombuffer(blob, dtype=np.uint8)
        stored = np.frombuffer(self.blob, dtype=np.uint8)
        keys = hash_ids(query, query_offsets)
        positions = np.minimum(np.searchsorted(self.sorted_hashes, keys), size - 1)
        hit = np.nonzero(self.sorted_hashes[positions] == keys)[0]
        candidates = self.order[positions[hit]].astype(np.int64)
        stored_start = self.offsets[candidates]
        same_length = (self.offsets[candidates + 1] - stored_start) == lengths[hit]
        rows, candidates, stored_start = hit[same_length], candidates[same_length], stored_start[same_length]
        row_lengths = np.asarray(lengths, dtype=np.int64)[rows]
        nonempty = row_lengths > 0
        rows, candidates, stored_start, row_lengths = rows[nonempty], candidates[nonempty], stored_start[nonempty], row_lengths[nonempty]
        total = int(row_lengths.sum())
        if total:
            row_begin = offsets_from_lengths(row_lengths)[:-1]
            within = np.arange(total, dtype=np.int64) - np.repeat(row_begin, row_lengths)
            equal = query[np.repeat(query_offsets[rows], row_lengths) + within] == stored[np.repeat(stored_start, row_lengths) + within]
            matched = np.logical_and.reduceat(equal, row_begin)
            result[rows[matched]] = candidates[matched]
        # Several ids share a hash: check the following equal hashes one by one.
        for row in hit[result[hit] < 0].tolist():
            wanted = blob[query_offsets[row] : query_offsets[row + 1]]
            position = int(positions[row])
            while position < size and self.sorted_hashes[position] == keys[row]:
                index = int(self.order[position])
                if self.blob[self.offsets[index] : self.offsets[index + 1]] == wanted:
                    result[row] = index
                    break
                position += 1
        return result


__all__ = ["IdIndex", "encode_ids"]
