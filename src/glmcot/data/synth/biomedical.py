"""Healthcare (Hetionet v1.0 schema) domain: 11 node types, 24 metaedges on both endpoints."""

from __future__ import annotations

import numpy as np

from glmcot.data.schemas import load_schema
from glmcot.data.synth.core import (SynthGraph, choose, counts_per_node, dedupe, expand,
                                    make_unique, popularity)
from glmcot.data.words import words

TINY_UNITS = 1000
EDGES_PER_UNIT = 28.0     # stored edges per node (measured at the small scale)

# Share of all nodes per type (Hetionet proportions, genes trimmed) and tiny-scale minimums.
_SHARE = {"Anatomy": 0.012, "Biological_Process": 0.12, "Cellular_Component": 0.03,
          "Compound": 0.06, "Disease": 0.02, "Gene": 0.55, "Molecular_Function": 0.04,
          "Pathway": 0.04, "Pharmacologic_Class": 0.01, "Side_Effect": 0.08, "Symptom": 0.02}
_MIN = {"Anatomy": 30, "Biological_Process": 40, "Cellular_Component": 20, "Compound": 70,
        "Disease": 40, "Gene": 400, "Molecular_Function": 20, "Pathway": 20,
        "Pharmacologic_Class": 15, "Side_Effect": 50, "Symptom": 50}

# metaedge -> (driving endpoint, mean edges per driving node, popularity skew of the other end)
_EDGES = {
    "Anatomy-downregulates-Gene": ("target", 1.5, 0.9), "Anatomy-expresses-Gene": ("target", 4.0, 0.9),
    "Anatomy-upregulates-Gene": ("target", 1.5, 0.9), "Compound-binds-Gene": ("source", 5.0, 0.8),
    "Compound-causes-Side Effect": ("source", 6.0, 0.9),
    "Compound-downregulates-Gene": ("source", 6.0, 0.7), "Compound-palliates-Disease": ("target", 3.0, 0.7),
    "Compound-resembles-Compound": ("source", 1.5, 0.6), "Compound-treats-Disease": ("target", 4.0, 0.7),
    "Compound-upregulates-Gene": ("source", 6.0, 0.7), "Disease-associates-Gene": ("source", 12.0, 0.6),
    "Disease-downregulates-Gene": ("source", 8.0, 0.6), "Disease-localizes-Anatomy": ("source", 5.0, 0.8),
    "Disease-presents-Symptom": ("source", 4.0, 0.9), "Disease-resembles-Disease": ("source", 1.5, 0.5),
    "Disease-upregulates-Gene": ("source", 8.0, 0.6), "Gene-covaries-Gene": ("source", 1.5, 0.7),
    "Gene-interacts-Gene": ("source", 3.0, 0.9), "Gene-participates-Biological Process": ("source", 3.0, 1.0),
    "Gene-participates-Cellular Component": ("source", 2.0, 1.0),
    "Gene-participates-Molecular Function": ("source", 2.0, 1.0),
    "Gene-participates-Pathway": ("source", 2.0, 1.0), "Gene-regulates-Gene": ("source", 3.0, 0.9),
    "Pharmacologic Class-includes-Compound": ("target", 0.8, 0.7),
}

_GENE_FAMILIES = ("KCTD", "TMEM", "SLC", "ZNF", "CYP4F", "ABL", "RBMY1", "P4HA", "L3MBTL", "TSN",
                  "MDH1", "SSX", "ENTPD", "CDAN", "GABR", "TEX", "HLA-D", "SPATA", "PRND", "ADAMTS",
                  "NEIL", "ALAS", "IGFBP", "EIF2AK", "PPP1C", "LRAT", "EXD", "FLII", "KCNH", "MAX")


def _names(base: tuple[str, ...], n: int, combos) -> list[str]:
    out = list(base[:n])
    k = 0
    while len(out) < n:
        out.append(combos(k))
        k += 1
    return make_unique(out)


def build(rng: np.random.Generator, units: int, progress=None) -> SynthGraph:
    schema = load_schema("biomedical")
    shrink = min(1.0, units / TINY_UNITS)      # below tiny (tests) the minimums shrink too
    counts = {t: max(int(_MIN[t] * shrink), int(units * _SHARE[t]), 5) for t in schema.node_types}
    g = SynthGraph(schema, counts, progress)
    anatomy, symptoms, diseases = words("anatomy"), words("symptoms"), words("diseases")
    organ_dis, side, comps = words("organ_disease"), words("side_effects"), words("compounds")
    syl, suf = words("compound_syllables"), words("compound_suffixes")
    bp, cc, mf, pw, pcs = words("go_bp"), words("go_cc"), words("go_mf"), words("pathways"), words("pharm_classes")
    qualifiers = ("Acute", "Chronic", "Severe", "Mild", "Recurrent", "Familial", "Neonatal", "Drug-Induced")
    prefixes = ("regulation of", "positive regulation of", "negative regulation of", "cellular",
                "response to", "establishment of")

    names = {
        "Anatomy": _names(anatomy, counts["Anatomy"],
                          lambda k: f"{('left', 'right', 'upper', 'lower', 'posterior')[k % 5]} {anatomy[k // 5 % len(anatomy)]}"
                          + ("" if k < 5 * len(anatomy) else f" {k}")),
        "Disease": _names(diseases, counts["Disease"],
                          lambda k: f"{anatomy[k % len(anatomy)]} {organ_dis[k // len(anatomy) % len(organ_dis)]}"
                          + ("" if k < len(anatomy) * len(organ_dis) else f" type {k}")),
        "Symptom": _names(symptoms, counts["Symptom"],
                          lambda k: f"{symptoms[k % len(symptoms)]}, {qualifiers[k // len(symptoms) % len(qualifiers)]}"
                          + ("" if k < len(symptoms) * len(qualifiers) else f" {k}")),
        "Side_Effect": _names(side, counts["Side_Effect"],
                              lambda k: f"{side[k % len(side)]} {('aggravated', 'acute', 'chronic', 'local', 'generalised')[k // len(side) % 5]}"
                              + ("" if k < 5 * len(side) else f" {k}")),
        "Compound": _names(comps, counts["Compound"],
                           lambda k: (syl[k % len(syl)] + syl[k // len(syl) % len(syl)]
                                      + suf[k // (len(syl) ** 2) % len(suf)]).capitalize()
                           + ("" if k < len(syl) ** 2 * len(suf) else f" {k}")),
        "Biological_Process": _names(bp, counts["Biological_Process"],
                                     lambda k: f"{prefixes[k % len(prefixes)]} {bp[k // len(prefixes) % len(bp)]}"
                                     + ("" if k < len(prefixes) * len(bp) else f" {k}")),
        "Cellular_Component": _names(cc, counts["Cellular_Component"],
                                     lambda k: f"{cc[k % len(cc)]} {('membrane', 'lumen', 'part', 'complex')[k // len(cc) % 4]}"
                                     + ("" if k < 4 * len(cc) else f" {k}")),
        "Molecular_Function": _names(mf, counts["Molecular_Function"],
                                     lambda k: f"{('regulator of', 'inhibitor of', 'activator of')[k % 3]} {mf[k // 3 % len(mf)]}"
                                     + ("" if k < 3 * len(mf) else f" {k}")),
        "Pathway": _names(pw, counts["Pathway"],
                          lambda k: f"{pw[k % len(pw)]} {('in cancer', 'in neurons', 'by interleukins', 'of nucleotides')[k // len(pw) % 4]}"
                          + ("" if k < 4 * len(pw) else f" {k}")),
        "Pharmacologic_Class": _names(pcs, counts["Pharmacologic_Class"],
                                      lambda k: f"{pcs[k % len(pcs)]}, {('Type II', 'Selective', 'Non-selective')[k // len(pcs) % 3]}"
                                      + ("" if k < 3 * len(pcs) else f" {k}")),
    }
    n_gene = counts["Gene"]
    fam = rng.integers(0, len(_GENE_FAMILIES), n_gene)
    num = rng.integers(1, 40, n_gene)
    letter = rng.integers(0, 30, n_gene)
    gene_names = [f"{_GENE_FAMILIES[f]}{n}{chr(65 + l) if l < 5 else ''}" for f, n, l in zip(fam, num, letter)]
    names["Gene"] = make_unique(gene_names)

    # Hetionet-style identifiers, disjoint across types.
    def numbered(prefix: str, n: int, start: int, width: int) -> list[str]:
        values = start + np.cumsum(rng.integers(1, 9, n))
        return [f"{prefix}{v:0{width}d}" for v in values]

    go = numbered("GO:", counts["Biological_Process"] + counts["Cellular_Component"]
                  + counts["Molecular_Function"], 1, 7)
    nb, nc = counts["Biological_Process"], counts["Cellular_Component"]
    ids = {
        "Anatomy": numbered("UBERON:", counts["Anatomy"], 1, 7),
        "Biological_Process": go[:nb], "Cellular_Component": go[nb:nb + nc],
        "Molecular_Function": go[nb + nc:],
        "Compound": numbered("DB", counts["Compound"], 1, 5),
        "Disease": numbered("DOID:", counts["Disease"], 1, 4),
        "Gene": [str(v) for v in 1 + np.cumsum(rng.integers(1, 30, n_gene))],
        "Pathway": numbered("WP", counts["Pathway"], 1, 4),
        "Pharmacologic_Class": numbered("N", counts["Pharmacologic_Class"], 10000000, 10),
        "Side_Effect": numbered("C", counts["Side_Effect"], 1, 7),
        "Symptom": numbered("D", counts["Symptom"], 1, 6),
    }
    label = {t: t.replace("_", " ") for t in schema.node_types}
    for t in schema.node_types:
        n = counts[t]
        feats = {"name": names[t], "node_type": [label[t]] * n}
        if t == "Compound":
            feats["inchikey"] = ["InChIKey=" + h.upper() for h in
                                 (rng.bytes(7 * n).hex()[i * 14:(i + 1) * 14] for i in range(n))]
            feats["url"] = [f"http://www.drugbank.ca/drugs/{x}" for x in ids[t]]
        elif t == "Gene":
            feats["description"] = [f"{names[t][i].rstrip('0123456789ABCDE')} family member {i % 97}"
                                    for i in range(n)]
            chrom = rng.integers(1, 24, n)
            feats["chromosome"] = [("X" if c == 23 else str(c)) for c in chrom]
            feats["url"] = [f"http://www.ncbi.nlm.nih.gov/gene/{x}" for x in ids[t]]
        elif t == "Anatomy":
            feats["mesh_id"] = [f"D{100000 + i}" for i in range(n)]
            feats["bto_id"] = [f"BTO:{i:07d}" for i in range(n)]
            feats["url"] = [f"http://purl.obolibrary.org/obo/{x.replace(':', '_')}" for x in ids[t]]
        elif t == "Pharmacologic_Class":
            kinds = ("Physiologic Effect", "Mechanism of Action", "Chemical/Ingredient")
            feats["class_type"] = [kinds[k] for k in rng.integers(0, 3, n)]
            feats["url"] = [f"http://purl.bioontology.org/ontology/NDFRT/{x}" for x in ids[t]]
        else:
            feats["url"] = [f"http://identifiers.org/{t.lower()}/{x}" for x in ids[t]]
        g.set_nodes(t, ids[t], feats)

    for meta in schema.metaedges:
        name, s_type, t_type = meta["name"], meta["source"], meta["target"]
        driver, mean, skew = _EDGES[name]
        d_type, o_type = (s_type, t_type) if driver == "source" else (t_type, s_type)
        k = counts_per_node(rng, counts[d_type], mean, high=max(2, counts[o_type] // 4), tail=2.5)
        d = expand(k)
        o = choose(rng, popularity(rng, counts[o_type], skew), len(d))
        src, dst = (d, o) if driver == "source" else (o, d)
        src, dst = dedupe(src, dst, counts[t_type], drop_self=s_type == t_type)
        if s_type == t_type:   # stored on both endpoints: one symmetric list under the name
            src, dst = dedupe(np.r_[src, dst], np.r_[dst, src], counts[t_type])
            g.add_edges(s_type, name, src, dst)
        else:
            g.add_both(s_type, name, src, dst)
    return g
