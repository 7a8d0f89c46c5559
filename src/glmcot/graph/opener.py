"""One opener: a location (a store folder, a dataset folder holding one, or a database URL) ->
a `GraphSource`.

    /path/to/store                       the memory-mapped store (its committed version)
    falkordb://HOST:PORT/GRAPH           a FalkorDB graph written by `glmcot graph export`
    sparql+http://HOST:PORT/PATH         a SPARQL 1.1 endpoint (queries at PATH; updates at the
                                         sibling /update, or sparql+http://...?update=URL)

A URL that went through a path option (one slash after the scheme) is accepted too.
"""

from __future__ import annotations

import os
import re
from enum import Enum
from pathlib import Path
from typing import Any

from glmcot.graph.graph_source import GraphSource, StoreSource

Location = "str | os.PathLike[str]"
_URL = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.\-]*):/")


class LocationKind(str, Enum):
    STORE = "store"
    FALKORDB = "falkordb"
    SPARQL = "sparql"


def location_kind(location: Any) -> LocationKind:
    text = os.fspath(location) if isinstance(location, os.PathLike) else str(location)
    match = _URL.match(text)
    if not match:
        return LocationKind.STORE
    scheme = match["scheme"]
    if scheme == "falkordb":
        return LocationKind.FALKORDB
    if scheme in ("sparql+http", "sparql+https"):
        return LocationKind.SPARQL
    raise ValueError(f"unknown graph location scheme {scheme!r} in {text!r}: give a store folder, "
                     "falkordb://HOST:PORT/GRAPH or sparql+http://HOST:PORT/PATH")


def is_database(location: Any) -> bool:
    return location_kind(location) is not LocationKind.STORE


def open_source(location: Any) -> GraphSource:
    """The graph at `location` (see the module docstring). Raises GraphFormatError for a folder
    that is no store and SourceUnavailable naming the URL for a database that cannot be reached."""
    kind = location_kind(location)
    if kind is LocationKind.FALKORDB:
        from glmcot.graph.live.falkordb_source import open_falkordb

        return open_falkordb(str(location))
    if kind is LocationKind.SPARQL:
        from glmcot.graph.live.sparql_source import open_sparql

        return open_sparql(str(location))
    from glmcot.graph.storage.store import Graph, store_directory

    return StoreSource(Graph.open(store_directory(Path(location))))


def canonical_location(location: Any) -> str:
    """A location as text, a database URL with its two slashes back."""
    text = os.fspath(location) if isinstance(location, os.PathLike) else str(location)
    if location_kind(text) is LocationKind.STORE:
        return text
    return re.sub(r"^([a-z0-9+.\-]+):/(?!/)", r"\1://", text)


__all__ = ["open_source", "location_kind", "is_database", "LocationKind", "canonical_location"]
