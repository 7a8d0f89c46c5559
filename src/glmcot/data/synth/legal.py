"""Legal (CourtListener) domain: opinions, opinion clusters, dockets, courts."""

from __future__ import annotations

import numpy as np

from glmcot.data.schemas import load_schema
from glmcot.data.synth.core import (SynthGraph, choose, counts_per_node, dedupe, expand,
                                    make_unique, popularity, unique_numeric_ids)
from glmcot.data.words import pairs, words

TINY_UNITS = 420
EDGES_PER_UNIT = 11.9     # stored edges per opinion (measured at the small scale)

_REPORTERS = ("f. 3d", "f. supp. 2d", "b. r.", "so. 2d", "p. 2d", "n. w. 2d", "s. w. 3d", "kan.",
              "pa. superior ct.", "mich. app.", "u. s.", "a. 2d", "n. e. 2d")


def _court_names(rng: np.random.Generator, n: int) -> tuple[list[str], list[str]]:
    patterns, states, counties = pairs("court_patterns"), pairs("states"), words("counties")
    names, cites = [], []
    for k in range(n):
        full, cite, _ = patterns[k % len(patterns)]
        state, abbr = states[int(rng.integers(0, len(states)))]
        county = counties[int(rng.integers(0, len(counties)))]
        num = int(rng.integers(1, 20))
        names.append(full.format(state=state, abbr=abbr, county=county, n=num))
        cites.append(cite.format(state=state, abbr=abbr, county=county, n=num))
    return make_unique(names), cites


def _case_name(rng: np.random.Generator, last, first) -> str:
    a, b = last[int(rng.integers(0, len(last)))], last[int(rng.integers(0, len(last)))]
    kind = rng.random()
    if kind < 0.25:
        return f"{('People', 'State', 'Commonwealth', 'United States')[int(rng.integers(0, 4))]} v. {a}"
    if kind < 0.35:
        return f"In re {first[int(rng.integers(0, len(first)))]} {a}"
    if kind < 0.45:
        return f"{a} & {b}, Inc. v. City of {words('counties')[int(rng.integers(0, 30))]}"
    return f"{a} v. {b}"


def build(rng: np.random.Generator, units: int, progress=None) -> SynthGraph:
    schema = load_schema("legal")
    n_op = units
    n_cl = max(20, int(units * 0.7))
    n_dk = max(15, int(units * 0.55))
    n_ct = max(30, units // 40)
    g = SynthGraph(schema, {"opinion": n_op, "opinion_cluster": n_cl, "docket": n_dk, "court": n_ct}, progress)
    first, last = words("first_names"), words("last_names")
    topics, holdings, outcomes = words("legal_topics"), words("legal_holdings"), words("legal_outcomes")

    # Courts.
    court_names, cites = _court_names(rng, n_ct)
    start = rng.integers(1680, 1990, n_ct)
    ended = rng.random(n_ct) < 0.4
    end = np.minimum(start + rng.integers(5, 150, n_ct), 2020)
    slugs, seen = [], set()
    for name in court_names:
        base = "".join(w[0] for w in name.lower().replace(",", "").split() if w[0].isalpha())[:8]
        slug, k = base, 2
        while slug in seen or slug.startswith(("op-", "opc-", "d-")):
            slug, k = f"{base}{k}", k + 1
        seen.add(slug)
        slugs.append(slug)
    g.set_nodes("court", slugs, {
        "full_name": court_names,
        "start_date": [f"{y}-{m:02d}-01" for y, m in zip(start, rng.integers(1, 13, n_ct))],
        "end_date": [f"{e}-12-31" if x else None for e, x in zip(end, ended)],
        "citation_string": cites})

    # Dockets: a few busy courts hold most of them.
    court_of = choose(rng, popularity(rng, n_ct, 1.0), n_dk)
    case = [_case_name(rng, last, first) for _ in range(n_dk)]
    pacer = unique_numeric_ids(rng, n_dk, 100000, gap=12)
    dk_ids = unique_numeric_ids(rng, n_dk + n_cl + n_op, 1000, gap=30)
    g.set_nodes("docket", [f"d-{x}" for x in dk_ids[:n_dk]], {
        "pacer_case_id": [f"{p}.0" for p in pacer], "case_name": case})
    g.add_both("docket", "court", np.arange(n_dk), court_of, reverse="docket")

    # Clusters: every docket has one, some a second (rehearing, appeal).
    docket_of = np.r_[np.arange(n_dk), rng.integers(0, n_dk, n_cl - n_dk)] if n_cl >= n_dk \
        else np.arange(n_cl)
    docket_of = rng.permutation(docket_of)
    judges, attorneys, syllabi = [], [], []
    for c in range(n_cl):
        names = [last[int(x)] for x in rng.integers(0, len(last), int(rng.integers(1, 4)))]
        style = rng.random()
        if len(names) == 3 and style < 0.5:
            judges.append(f"{names[0]}, {names[1]} and {names[2]}, Circuit Judges")
        elif style < 0.7:
            judges.append(f"{names[0].upper()}, JUDGE.")
        else:
            judges.append(", ".join(names))
        attorneys.append(f"{first[int(rng.integers(0, len(first)))][0]}. {last[int(rng.integers(0, len(last)))]}, "
                         f"for plaintiff; {last[int(rng.integers(0, len(last)))]} & "
                         f"{last[int(rng.integers(0, len(last)))]}, for defendant")
        parts = []
        for k in range(int(rng.integers(1, 3))):
            topic = topics[int(rng.integers(0, len(topics)))]
            holding = holdings[int(rng.integers(0, len(holdings)))].format(A=topic)
            cited = (f"{last[int(rng.integers(0, len(last)))].lower()} v. "
                     f"{last[int(rng.integers(0, len(last)))].lower()}, {int(rng.integers(1, 999))} "
                     f"{_REPORTERS[int(rng.integers(0, len(_REPORTERS)))]} {int(rng.integers(1, 1500))}")
            parts.append(f"< p > {k + 1}. {topic} — {holding}. {cited}, followed. < / p >")
        syllabi.append(" ".join(parts))
    g.set_nodes("opinion_cluster", [f"opc-{x}" for x in dk_ids[n_dk:n_dk + n_cl]], {
        "syllabus": syllabi, "judges": judges, "case_name": [case[d] for d in docket_of],
        "attorneys": attorneys})
    g.add_both("opinion_cluster", "docket", np.arange(n_cl), docket_of, reverse="opinion_cluster")

    # Opinions: each cluster has a lead opinion, some a concurrence or dissent.
    cluster_of = np.r_[np.arange(min(n_cl, n_op)), rng.integers(0, n_cl, max(0, n_op - n_cl))]
    cluster_of = rng.permutation(cluster_of)
    year = rng.integers(1850, 2020, n_cl)
    volume = rng.integers(1, 999, n_cl)
    page = rng.integers(1, 1500, n_cl)
    reporter = rng.integers(0, len(_REPORTERS), n_cl)
    texts = []
    for o in range(n_op):
        c = int(cluster_of[o])
        caption = case[docket_of[c]].lower()
        topic = topics[int(rng.integers(0, len(topics)))]
        holding = holdings[int(rng.integers(0, len(holdings)))].format(A=topic)
        judge = last[int(rng.integers(0, len(last)))].lower()
        texts.append(
            f"< div > < center > < b > {volume[c]} {_REPORTERS[reporter[c]]} {page[c]} ( {year[c]} ) "
            f"< / b > < / center > < center > < h1 > {caption} < / h1 > < / center > < p > {judge}, "
            f"j. this appeal concerns {topic}. we hold that {holding}. "
            f"{outcomes[int(rng.integers(0, len(outcomes)))].lower()} < / p > < / div >")
    g.set_nodes("opinion", [f"op-{x}" for x in dk_ids[n_dk + n_cl:]], {"plain_text": texts})
    g.add_both("opinion", "opinion_cluster", np.arange(n_op), cluster_of, reverse="opinion")

    # Citations: mostly to opinions of the same court, popular precedents anywhere.
    k = counts_per_node(rng, n_op, 4.0, high=40, tail=2.0)
    src = expand(k)
    op_court = court_of[docket_of[cluster_of]]
    order = np.lexsort((rng.random(n_op), op_court))
    position = np.empty(n_op, dtype=np.int64)
    position[order] = np.arange(n_op)
    near = order[np.clip(position[src] + rng.integers(-15, 16, len(src)), 0, n_op - 1)]
    far = choose(rng, popularity(rng, n_op, 0.9), len(src))
    dst = np.where(rng.random(len(src)) < 0.6, near, far)
    src, dst = dedupe(src, dst, n_op, drop_self=True)
    g.add_both("opinion", "reference", src, dst, reverse="cited_by")
    return g
