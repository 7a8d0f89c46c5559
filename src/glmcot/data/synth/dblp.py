"""Academic (DBLP) domain: papers, authors, venues."""

from __future__ import annotations

import re

import numpy as np

from glmcot.data.schemas import load_schema
from glmcot.data.synth.core import (SynthGraph, choose, counts_per_node, dedupe, expand, hex_ids,
                                    popularity)
from glmcot.data.words import words

TINY_UNITS = 600          # papers at tiny scale (about 1k nodes)
EDGES_PER_UNIT = 15.6     # stored edges per paper (measured at the small scale)

_PATTERNS = (
    "{M} {T} for {T2}", "{M} {T} with {T2}", "Towards {M} {T}", "{T} via {M} {T2}",
    "A Survey on {M} {T}", "On the Limits of {M} {T}", "{M} {T}: A Case Study in {T2}",
    "Learning {T} from {T2}", "{T} Meets {T2}", "An {M} Approach to {T}",
    "{M} and {M2} {T} in {T2}", "Improving {T} Using {M} {T2}",
)
_SUFFIXES = (" under Noisy Labels", " for Edge Devices", " in Heterogeneous Networks", " at Scale",
             ": Theory and Practice", " with Limited Supervision", " in the Wild", " for Smart Cities",
             " with Provable Guarantees", " under Uncertainty", " for Healthcare Applications",
             " in Dynamic Environments", ": An Empirical Study", " with Applications to Robotics",
             " for Low-Resource Settings", " in Industrial Systems", " using Transformers",
             " over Encrypted Data", " on Multicore Processors", " for 5G Networks",
             " with Graph Embeddings", " in Autonomous Driving", " for Remote Sensing Images",
             " on Resource-Constrained Hardware", ": A Benchmark", " with Human Feedback")
_VARIANTS = (" Revisited", " (Extended Abstract)", ": Extended Version", " - Part II", "",
             " Using Deep Learning", " for Mobile Devices")


def _titles(rng: np.random.Generator, n: int) -> list[str]:
    methods, topics = words("cs_methods"), words("cs_topics")
    pat = rng.integers(0, len(_PATTERNS), n)
    m1, m2 = rng.integers(0, len(methods), n), rng.integers(0, len(methods), n)
    tp = popularity(rng, len(topics), 0.25)
    suffix_kind = rng.random(n)
    suffix = rng.integers(0, len(_SUFFIXES), n)
    t3, m3 = rng.integers(0, len(topics), n), rng.integers(0, len(methods), n)
    t1 = choose(rng, tp, n)
    t2 = (t1 + rng.integers(1, len(topics), n)) % len(topics)     # never the same topic twice
    out = []
    for i in range(n):
        text = _PATTERNS[pat[i]].format(M=methods[m1[i]], M2=methods[m2[i]].lower(),
                                        T=topics[t1[i]], T2=topics[t2[i]])
        if suffix_kind[i] < 0.25:
            text += _SUFFIXES[suffix[i]]
        elif suffix_kind[i] < 0.55:
            text += f" for {topics[t3[i]]}"
        elif suffix_kind[i] < 0.85:
            text += f" via {methods[m3[i]]} {topics[t3[i]]}"
        out.append(re.sub(r"\bAn ([^AEIOU])", r"A \1", text))
    # Near-duplicates, as in real data: some papers reuse another title with a small change.
    dup = np.flatnonzero(rng.random(n) < 0.04)
    for i in dup:
        j = int(rng.integers(0, n))
        out[i] = out[j] + _VARIANTS[int(rng.integers(0, len(_VARIANTS)))]
    return out


def _person_names(rng: np.random.Generator, n: int) -> list[str]:
    first, last = words("first_names"), words("last_names")
    fp, lp = popularity(rng, len(first), 0.6), popularity(rng, len(last), 0.8)
    f, la = choose(rng, fp, n), choose(rng, lp, n)
    initial = rng.integers(0, 26, n)
    style = rng.random(n)
    out = []
    for i in range(n):
        if style[i] < 0.35:
            out.append(f"{first[f[i]]} {chr(65 + initial[i])}. {last[la[i]]}")
        elif style[i] < 0.42:
            out.append(f"{first[f[i]][0]}. {last[la[i]]}")
        else:
            out.append(f"{first[f[i]]} {last[la[i]]}")
    return out


def build(rng: np.random.Generator, units: int, progress=None) -> SynthGraph:
    schema = load_schema("dblp")
    n_paper = units
    n_author = max(40, int(units * 0.45))
    n_venue = max(12, int(units / 150))
    g = SynthGraph(schema, {"paper": n_paper, "author": n_author, "venue": n_venue}, progress)

    # Papers in index order get non-decreasing years, so references point to older papers.
    years = np.sort(1990 + np.floor(34 * rng.beta(2.5, 1.2, n_paper)).astype(np.int64))
    keywords = words("cs_keywords")
    kp = popularity(rng, len(keywords), 0.9)
    kcount = rng.integers(2, 6, n_paper)
    kdraw = choose(rng, kp, int(kcount.sum()))
    topics = words("cs_topics")
    titles = _titles(rng, n_paper)
    abstracts, kw_lists, pos = [], [], 0
    ds = rng.integers(2, 9, n_paper)
    for i in range(n_paper):
        kws = list(dict.fromkeys(keywords[k] for k in kdraw[pos:pos + kcount[i]]))
        pos += kcount[i]
        kw_lists.append(kws)
        topic = topics[(i * 7 + len(titles[i])) % len(topics)].lower()
        abstracts.append(f"This paper studies {titles[i].lower()}. We relate it to {topic} and "
                         f"{kws[0]}, and evaluate the approach on {ds[i]} benchmark datasets.")
    lang = np.where(rng.random(n_paper) < 0.96, "en", "zh")
    ids = hex_ids(rng, n_paper + n_author)
    g.set_nodes("paper", ids[:n_paper], {
        "title": titles, "abstract": abstracts, "keywords": kw_lists, "lang": list(lang),
        "year": [int(y) for y in years]})

    orgs = words("orgs")
    op = popularity(rng, len(orgs), 0.7)
    org_idx = choose(rng, op, n_author)
    g.set_nodes("author", ids[n_paper:], {
        "name": _person_names(rng, n_author),
        "organization": [orgs[k] for k in org_idx]})

    venue_names = list(words("venues"))
    while len(venue_names) < n_venue:
        k = len(venue_names)
        venue_names.append(f"{words('venues')[k % len(words('venues'))]} Workshops {k}")
    g.set_nodes("venue", [f"pub_{k}" for k in range(n_venue)], {"name": venue_names[:n_venue]})

    # Authorship: a few prolific hub authors; coauthors of a paper often share an organization.
    n_auth = counts_per_node(rng, n_paper, 3.0, low=1, high=12)
    src = expand(n_auth)
    ap = popularity(rng, n_author, 0.75)
    lead = choose(rng, ap, n_paper)
    near = (lead[src] + rng.integers(-25, 26, len(src))) % n_author
    dst = np.where(rng.random(len(src)) < 0.55, near, choose(rng, ap, len(src)))
    first = np.r_[0, np.cumsum(n_auth)[:-1]]
    dst[first] = lead
    src, dst = dedupe(src, dst, n_author)
    g.add_both("paper", "author", src, dst, reverse="paper")

    vp = popularity(rng, n_venue, 1.0)
    venue = choose(rng, vp, n_paper)
    g.add_both("paper", "venue", np.arange(n_paper), venue, reverse="paper")

    # Citations: popular older papers collect most of them.
    n_ref = counts_per_node(rng, n_paper, 8.0, high=60)
    src = expand(n_ref)
    cp = popularity(rng, n_paper, 0.9)
    dst = choose(rng, cp, len(src))
    keep = dst < src
    src, dst = dedupe(src[keep], dst[keep], n_paper)
    g.add_both("paper", "reference", src, dst, reverse="cited_by")
    return g
