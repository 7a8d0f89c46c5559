"""The stable 64-bit hash of node ids, in two forms that agree bit for bit.

``hash_id`` hashes one id in Python (a lookup); ``hash_ids`` hashes many ids held in one UTF-8
blob, vectorised with numpy (import, store writing). The hash is the id's bytes read as a
little-endian integer modulo the Mersenne prime 2^61 - 1, then multiplied by a 64-bit odd
constant (mod 2^64) to spread the bits. It is cheap in both forms, which matters more here than
strength: every lookup verifies the id string, so a collision costs one extra probe, never a
wrong answer.
"""

from __future__ import annotations

import numpy as np

ID_HASH_NAME = "mod61-mix64"
_PRIME = (1 << 61) - 1
_MIX = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1
_LOW53 = (1 << 53) - 1
_VECTOR_BYTES = 256  # longer ids are hashed one at a time (linear in their length)


def hash_id(data: bytes) -> int:
    """Hash of one id's UTF-8 bytes."""
    return ((int.from_bytes(data, "little") % _PRIME) * _MIX) & _MASK64


def hash_ids(blob: np.ndarray | bytes, offsets: np.ndarray) -> np.ndarray:
    """Hashes of the ids ``blob[offsets[i]:offsets[i+1]]``, as uint64 (equal to ``hash_id``)."""
    data = np.frombuffer(blob, dtype=np.uint8) if isinstance(blob, (bytes, bytearray, memoryview)) else blob
    offsets = np.asarray(offsets, dtype=np.int64)
    count = len(offsets) - 1
    result = np.zeros(max(count, 0), dtype=np.uint64)
    if count <= 0:
        return result
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    # Ids longer than _VECTOR_BYTES are hashed one by one with Python's big-int arithmetic, which
    # is linear in their length; the vectorised Horner loop below costs one numpy pass per byte
    # position, so it only runs over the first _VECTOR_BYTES positions (a 1 MB id would otherwise
    # cost a million passes).
    long_rows = np.nonzero(lengths > _VECTOR_BYTES)[0]
    for row in long_rows.tolist():
        result[row] = hash_id(data[int(starts[row]) : int(offsets[row + 1])].tobytes())
    short = np.nonzero(lengths <= _VECTOR_BYTES)[0] if long_rows.size else slice(None)
    result[short] = _hash_short(data, starts[short], lengths[short])
    return result


def _hash_short(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    count = len(lengths)
    result = np.zeros(count, dtype=np.uint64)
    if count == 0:
        return result
    # Longest first, so the rows still active at byte position k are a prefix: total work is the
    # total number of bytes, whatever the length distribution.
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    sorted_starts = starts[order]
    h = np.zeros(count, dtype=np.uint64)
    prime = np.uint64(_PRIME)
    low53 = np.uint64(_LOW53)
    shift53, shift8, shift61 = np.uint64(53), np.uint64(8), np.uint64(61)
    max_length = int(sorted_lengths[0]) if count else 0
    # active[k] = number of ids longer than k
    active_counts = np.searchsorted(-sorted_lengths, -np.arange(max_length), side="left")
    for position in range(max_length - 1, -1, -1):  # Horner from the last byte to the first
        active = int(active_counts[position])
        part = h[:active]
        byte = data[sorted_starts[:active] + position].astype(np.uint64)
        # part * 256 mod p, for part < 2^61: split so nothing overflows 64 bits (2^61 = 1 mod p)
        value = ((part & low53) << shift8) + (part >> shift53) + byte
        value = (value & prime) + (value >> shift61)
        value = np.where(value >= prime, value - prime, value)
        h[:active] = value
    mixed = h * np.uint64(_MIX)  # wraps mod 2^64, as the Python form masks
    result[order] = mixed
    return result


def find_duplicate(sorted_hashes: np.ndarray, order: np.ndarray, id_bytes) -> tuple[int, int] | None:
    """Two global indices with the same id, or None. ``id_bytes(index)`` gives an id's bytes.

    Only ids whose hash is shared are compared, all against all within a shared hash.
    """
    same = np.nonzero(sorted_hashes[1:] == sorted_hashes[:-1])[0]
    if not same.size:
        return None
    seen: dict[tuple[int, bytes], int] = {}
    for position in np.union1d(same, same + 1).tolist():
        index = int(order[position])
        key = (int(sorted_hashes[position]), bytes(id_bytes(index)))
        if key in seen:
            first = seen[key]
            return (first, index) if first < index else (index, first)
        seen[key] = index
    return None


__all__ = ["ID_HASH_NAME", "hash_id", "hash_ids", "find_duplicate"]
