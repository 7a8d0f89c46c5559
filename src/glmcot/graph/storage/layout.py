"""The on-disk layout of a graph store, shared by the writer and the reader.

Layout of a store directory (format ``glmcot.graph``, see ``STORE_FORMAT_VERSION``)::

    manifest.json                  types, features, relations, counts, warnings
    nodes/ids.blob                 all node ids, UTF-8, concatenated in global index order
    nodes/ids_offsets.npy          int64 [num_nodes + 1]
    nodes/id_hash.npy              uint64 sorted 64-bit hashes of the ids
    nodes/id_order.npy             int32|int64 global index of each sorted hash
    nodes/id_directory.npy         int32|int64 [2^bits + 1]: first sorted-hash position per
                                   top-bits bucket (1.1+; lookups skip the binary search)
    nodes/degree.npy               int32|int64 out-degree over all relations (chunk ranking)
    features/t<T>/f<F>.*           one column per (type, feature): mask + values by kind
    edges/r<R>.indptr.npy          CSR over the source type's nodes (local index)
    edges/r<R>.dst.npy             global indices of the destinations
    edges/r<R>.weight.npy          optional float32 edge weights
    edges/r<R>.dangling_*          (1.2) neighbour ids naming no node, kept as the source file
                                   lists them: _src (local source), _pos (place in the full
                                   list), _offsets + .blob (the id strings); sorted by (src, pos)
    edges/r<R>.absent.npy          (1.2) local indices of nodes whose file has no key for
                                   the relation (other nodes of the type have it)
    features/t<T>/f<F>.null.npy    (1.2) present features whose value is JSON null

Id lookup needs no dictionary at open time: hash the id, binary-search the sorted hash array,
then verify the id string.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from glmcot.graph.errors import GraphFormatError
from glmcot.graph.storage.idhash import ID_HASH_NAME, hash_id

STORE_FORMAT = "glmcot.graph"
# 1.1 added nodes/id_directory.npy; 1.2 added dangling neighbour ids (edges/r<R>.dangling_*) and
# null feature values (features/.../f<F>.null.npy). Older 1.x stores still open: a file a store
# lacks means "none of those".
STORE_FORMAT_VERSION = "1.2"

FeatureValue = str | int | float | bool | list | dict

ENCODING = "utf-8"
ENCODING_ERRORS = "surrogatepass"  # JSON may carry lone surrogates; keep them round-trippable


def _blake2b_id_hash(data: bytes) -> int:
    # The id hash of stores written before "id_hash" was recorded in the manifest.
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


ID_HASHES = {ID_HASH_NAME: hash_id, "blake2b64": _blake2b_id_hash}


def directory_bits(num_nodes: int) -> int:
    """Top hash bits used to bucket ids: about one id per bucket, at most 2^28 buckets."""
    return min(max(int(num_nodes).bit_length() - 1, 0), 28)


def index_dtype(max_value: int) -> np.dtype:
    return np.dtype(np.int32) if max_value < 2**31 - 1 else np.dtype(np.int64)


def offsets_from_lengths(lengths: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def save_array(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as handle:
        np.save(handle, np.ascontiguousarray(array), allow_pickle=False)


def load_array(path: Path) -> np.ndarray:
    """Memory-maps a saved array (zero-length arrays, which cannot be mapped, are read)."""
    if not path.is_file():
        raise GraphFormatError(f"{path} is missing: the store is incomplete; re-import the graph")
    if path.stat().st_size == 0:
        raise GraphFormatError(f"{path}: empty array file")
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as error:
        array = np.load(path, allow_pickle=False)
        if array.size:
            raise GraphFormatError(f"{path}: {error}") from error
        return array
