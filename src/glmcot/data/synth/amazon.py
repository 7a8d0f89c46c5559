"""E-commerce (Amazon) domain: items and brands."""

from __future__ import annotations

import numpy as np

from glmcot.data.schemas import load_schema
from glmcot.data.synth.core import (SynthGraph, choose, counts_per_node, dedupe, expand,
                                    local_targets, popularity)
from glmcot.data.words import pairs, words

TINY_UNITS = 900
EDGES_PER_UNIT = 15.5     # stored edges per item (measured at the small scale)

_ASIN_CHARS = np.array(list("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"))


def build(rng: np.random.Generator, units: int, progress=None) -> SynthGraph:
    schema = load_schema("amazon")
    n_item = units
    n_brand = max(30, units // 12)
    g = SynthGraph(schema, {"item": n_item, "brand": n_brand}, progress)

    brand_words = words("brands")
    brand_names = [brand_words[k] if k < len(brand_words)
                   else f"{brand_words[k % len(brand_words)]} {words('product_adjectives')[k // len(brand_words) % 32]}"
                   for k in range(n_brand)]
    # Later repeats of a base name get a number; real brand lists have such near-duplicates.
    seen: dict[str, int] = {}
    for k, name in enumerate(brand_names):
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            brand_names[k] = f"{name} {seen[name]}"

    products = pairs("product_nouns")
    adjectives, variants = words("product_adjectives"), words("product_variants")
    bp = popularity(rng, n_brand, 0.9)
    brand = choose(rng, bp, n_item)
    # Each brand sells a few product kinds: its items cluster by (brand, product).
    brand_products = rng.integers(0, len(products), size=(n_brand, 3))
    noun = brand_products[brand, rng.integers(0, 3, n_item)]
    adj = rng.integers(0, len(adjectives), n_item)
    var = rng.integers(0, len(variants), n_item)
    model = rng.integers(100, 99999, n_item)
    style = rng.random(n_item)
    titles, categories, descriptions = [], [], []
    for i in range(n_item):
        bname, (pname, cat) = brand_names[brand[i]], products[noun[i]]
        if style[i] < 0.35:
            title = f"{bname} {model[i]} {adjectives[adj[i]]} {pname}, {variants[var[i]]}"
        elif style[i] < 0.65:
            title = f"{adjectives[adj[i]]} {pname} by {bname} ({variants[var[i]]})"
        elif style[i] < 0.85:
            title = f"{bname} {adjectives[adj[i]]} {pname}"
        else:
            title = f"{adjectives[adj[i]]} {pname} for Everyday Use, {variants[var[i]]}"
        titles.append(title)
        categories.append([cat])
        descriptions.append(f"{adjectives[adj[i]]} {pname.lower()} from {bname}. "
                            f"Available as {variants[var[i]]}.")
    cents = np.round(np.exp(rng.normal(3.0, 1.0, n_item)) * 100).astype(np.int64) + 99
    has_price = rng.random(n_item) < 0.9
    prices = [round(int(c) / 100, 2) if h else None for c, h in zip(cents, has_price)]
    chars = _ASIN_CHARS[rng.integers(0, len(_ASIN_CHARS), size=(n_item, 9))]
    asins = ["B" + "".join(row) for row in chars]
    seen_ids: set[str] = set()
    for i, a in enumerate(asins):
        while a in seen_ids:
            a = "B" + "".join(_ASIN_CHARS[rng.integers(0, len(_ASIN_CHARS), 9)])
        seen_ids.add(a)
        asins[i] = a
    g.set_nodes("item", asins, {
        "title": titles, "description": descriptions, "price": prices,
        "img": [f"http://ecx.images-amazon.com/images/I/{a[1:]}.jpg" for a in asins],
        "category": categories})
    g.set_nodes("brand", [f"brand_{k}" for k in range(n_brand)], {"name": brand_names})
    g.add_both("item", "brand", np.arange(n_item), brand, reverse="item")

    # Related items: mostly neighbours in (product, brand) order, some popular items anywhere.
    order = np.lexsort((rng.random(n_item), brand, noun))
    pop = popularity(rng, n_item, 0.8)

    def related(mean: float, window: int, p_global: float, tail: float, high: int):
        k = counts_per_node(rng, n_item, mean, high=high, tail=tail)
        src = expand(k)
        dst = local_targets(rng, src, order, window, p_global, pop)
        return dedupe(src, dst, n_item, drop_self=True)

    src, dst = related(5.0, 12, 0.2, 1.6, 80)           # co-viewing is symmetric
    g.add_edges("item", "also_viewed_item", *dedupe(np.r_[src, dst], np.r_[dst, src], n_item))
    src, dst = related(0.8, 4, 0.05, 2.5, 6)
    g.add_edges("item", "bought_together_item", *dedupe(np.r_[src, dst], np.r_[dst, src], n_item))
    g.add_edges("item", "also_bought_item", *related(4.0, 20, 0.3, 1.5, 60))
    g.add_edges("item", "buy_after_viewing_item", *related(1.5, 10, 0.2, 2.0, 10))
    return g
