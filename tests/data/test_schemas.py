"""The synthetic schemas equal GRBench's (grbench.md §1), written out here independently."""

from __future__ import annotations

import pytest

from glmcot.data.schemas import DOMAINS, UnknownDomainError, canonical_domain, graph_definition, load_schema

GRBENCH = {
    "dblp": {
        "paper": ({"title", "abstract", "keywords", "lang", "year"}, {"author", "venue", "reference", "cited_by"}, "title"),
        "author": ({"name", "organization"}, {"paper"}, "name"),
        "venue": ({"name"}, {"paper"}, "name"),
    },
    "amazon": {
        "item": ({"title", "description", "price", "img", "category"},
                 {"also_viewed_item", "buy_after_viewing_item", "also_bought_item", "bought_together_item", "brand"}, "title"),
        "brand": ({"name"}, {"item"}, "name"),
    },
    "goodreads": {
        "book": ({"country_code", "language_code", "is_ebook", "title", "description", "format", "num_pages",
                  "publication_year", "url", "popular_shelves", "genres"}, {"author", "publisher", "series", "similar_books"}, "title"),
        "author": ({"name"}, {"book"}, "name"),
        "publisher": ({"name"}, {"book"}, "name"),
        "series": ({"title", "description"}, {"book"}, "title"),
    },
    "legal": {
        "opinion": ({"plain_text"}, {"reference", "cited_by", "opinion_cluster"}, "plain_text"),
        "opinion_cluster": ({"syllabus", "judges", "case_name", "attorneys"}, {"opinion", "docket"}, "syllabus"),
        "docket": ({"pacer_case_id", "case_name"}, {"opinion_cluster", "court"}, "pacer_case_id"),
        "court": ({"full_name", "start_date", "end_date", "citation_string"}, {"docket"}, "full_name"),
    },
}

HETIONET_METAEDGES = [
    "Anatomy-downregulates-Gene", "Anatomy-expresses-Gene", "Anatomy-upregulates-Gene", "Compound-binds-Gene",
    "Compound-causes-Side Effect", "Compound-downregulates-Gene", "Compound-palliates-Disease",
    "Compound-resembles-Compound", "Compound-treats-Disease", "Compound-upregulates-Gene",
    "Disease-associates-Gene", "Disease-downregulates-Gene", "Disease-localizes-Anatomy", "Disease-presents-Symptom",
    "Disease-resembles-Disease", "Disease-upregulates-Gene", "Gene-covaries-Gene", "Gene-interacts-Gene",
    "Gene-participates-Biological Process", "Gene-participates-Cellular Component",
    "Gene-participates-Molecular Function", "Gene-participates-Pathway", "Gene-regulates-Gene",
    "Pharmacologic Class-includes-Compound",
]
HETIONET_TYPES = ["Anatomy", "Biological_Process", "Cellular_Component", "Compound", "Disease", "Gene",
                  "Molecular_Function", "Pathway", "Pharmacologic_Class", "Side_Effect", "Symptom"]


@pytest.mark.parametrize("domain", sorted(GRBENCH))
def test_schema_matches_grbench(domain):
    schema = load_schema(domain)
    assert set(schema.node_types) == set(GRBENCH[domain])
    for name, (features, relations, text_key) in GRBENCH[domain].items():
        spec = schema.node_types[name]
        assert set(spec.features) == features, name
        assert set(spec.relations) == relations, name
        assert spec.text_key == text_key
        for relation, target in spec.relations.items():
            assert target in schema.node_types


def test_biomedical_is_hetionet():
    schema = load_schema("biomedical")
    assert sorted(schema.node_types) == HETIONET_TYPES
    assert [m["name"] for m in schema.metaedges] == HETIONET_METAEDGES
    for meta in schema.metaedges:
        source, target = meta["source"], meta["target"]
        # stored on both endpoints under the metaedge name
        assert schema.node_types[source].relations[meta["name"]] == target
        assert schema.node_types[target].relations[meta["name"]] == source
    for name, spec in schema.node_types.items():
        assert {"name", "node_type"} <= set(spec.features)
        assert spec.text_key == "name"
    assert set().union(*(spec.relations for spec in schema.node_types.values())) == set(HETIONET_METAEDGES)


def test_aliases_and_errors():
    assert canonical_domain("academic") == "dblp"
    assert canonical_domain("E-commerce") == "amazon"
    assert canonical_domain("literature") == "goodreads"
    assert canonical_domain("healthcare") == "biomedical"
    with pytest.raises(UnknownDomainError, match="expected one of dblp"):
        canonical_domain("chemistry")
    for domain in DOMAINS:
        text = graph_definition(domain)
        assert 2 <= text.count(". ") + 1 <= 4 and len(text) > 100
