"""Locations: which source a location names, and URLs that went through a path option."""

from __future__ import annotations

from pathlib import Path

import pytest

from glmcot.graph.live.falkordb_source import FalkorLocation
from glmcot.graph.opener import LocationKind, canonical_location, location_kind
from glmcot.graph.live.sparql_source import SparqlLocation, iri_id, node_iri


def test_location_kinds_and_collapsed_urls():
    assert location_kind("/data/dblp") is LocationKind.STORE
    assert location_kind(Path("relative/store")) is LocationKind.STORE
    assert location_kind("falkordb://127.0.0.1:6379/dblp") is LocationKind.FALKORDB
    assert location_kind(Path("falkordb://127.0.0.1:6379/dblp")) is LocationKind.FALKORDB  # Path keeps one slash
    assert canonical_location(Path("falkordb://127.0.0.1:6379/dblp")) == "falkordb://127.0.0.1:6379/dblp"
    assert location_kind("sparql+http://h:7878/query") is LocationKind.SPARQL
    with pytest.raises(ValueError, match="unknown graph location scheme 'neo4j'"):
        location_kind("neo4j://localhost:7687")


def test_falkordb_locations_take_only_plain_graph_names():
    assert FalkorLocation.parse("falkordb:/h:1234/g-1.x") == FalkorLocation("h", 1234, "g-1.x")
    for bad in ("falkordb://h:1/g;DROP", "falkordb://h:1/", "falkordb://h:1/a b", "falkordb://h:1/g/extra"):
        with pytest.raises(ValueError, match="not a FalkorDB location"):
            FalkorLocation.parse(bad)


def test_sparql_locations_and_node_iris():
    location = SparqlLocation.parse("sparql+http://127.0.0.1:7878/query")
    assert (location.query_url, location.update_url, location.store_url) == (
        "http://127.0.0.1:7878/query", "http://127.0.0.1:7878/update", "http://127.0.0.1:7878/store")
    hostile = '} ; DROP ALL <x> "quoted" \ud800'
    iri = node_iri(hostile)
    assert all(ch.isalnum() or ch in ":%-._~" for ch in iri)  # nothing a query could read as syntax
    assert iri_id(iri) == hostile
