"""Literature (Goodreads) domain: books, authors, publishers, series."""

from __future__ import annotations

import numpy as np

from glmcot.data.schemas import load_schema
from glmcot.data.synth.core import (SynthGraph, choose, counts_per_node, dedupe, expand,
                                    local_targets, popularity, unique_numeric_ids)
from glmcot.data.synth.dblp import _person_names
from glmcot.data.words import words

TINY_UNITS = 600
EDGES_PER_UNIT = 10.0     # stored edges per book (measured at the small scale)

_LANGS = ("eng", "eng", "eng", "eng", "eng", "en-US", "en-GB", "spa", "fre", "ger", "ita", "ara")
_COUNTRY = ("US", "US", "US", "GB", "CA", "AU")


def _title(rng: np.random.Generator, patterns, vocab) -> str:
    a, b = vocab[int(rng.integers(0, len(vocab)))], vocab[int(rng.integers(0, len(vocab)))]
    return patterns[int(rng.integers(0, len(patterns)))].format(A=a, B=b)


def build(rng: np.random.Generator, units: int, progress=None) -> SynthGraph:
    schema = load_schema("goodreads")
    n_book = units
    n_author = max(30, units // 3)
    n_pub = max(20, units // 15)
    n_series = max(10, units // 8)
    g = SynthGraph(schema, {"book": n_book, "author": n_author, "publisher": n_pub,
                            "series": n_series}, progress)
    patterns, vocab = words("book_patterns"), words("book_words")
    genres, shelves, formats = words("genres"), words("shelves"), words("formats")

    # Authors: heavy-tailed output; each has a main genre, favourite publisher and language.
    ap = popularity(rng, n_author, 0.85)
    author = choose(rng, ap, n_book)
    order = np.argsort(author, kind="stable")          # books grouped by author
    author_genre = rng.integers(0, len(genres), n_author)
    pp = popularity(rng, n_pub, 0.9)
    author_pub = choose(rng, pp, n_author)
    author_lang = np.where(rng.random(n_author) < 0.8, 0, rng.integers(0, len(_LANGS), n_author))

    # Series: consecutive books of one author, numbered.
    series_of = np.full(n_book, -1, dtype=np.int64)
    number_in = np.zeros(n_book, dtype=np.int64)
    s = 0
    pos = 0
    while pos < n_book and s < n_series:
        a = author[order[pos]]
        end = pos
        while end < n_book and author[order[end]] == a:
            end += 1
        if end - pos >= 2 and rng.random() < 0.6:
            length = int(min(end - pos, rng.integers(2, 7)))
            for k in range(length):
                series_of[order[pos + k]] = s
                number_in[order[pos + k]] = k + 1
            s += 1
        pos = end
    series_titles = [_title(rng, patterns, vocab).replace("A Novel", "Saga") for _ in range(n_series)]
    series_titles = [t if rng.random() < 0.5 else f"The {t.split()[-1]} Saga" for t in series_titles]

    titles, descriptions = [], []
    for i in range(n_book):
        base = _title(rng, patterns, vocab)
        if rng.random() < 0.75:   # subtitles keep titles varied at large scales
            base += f": {_title(rng, patterns, vocab)}"
        if series_of[i] >= 0:
            base = f"{base} ({series_titles[series_of[i]]}, #{number_in[i]})"
        titles.append(base)
        descriptions.append(f"A {genres[author_genre[author[i]]]} story: {base.lower()}.")
    # Near-duplicate titles: reissues and translations of an existing title.
    for i in np.flatnonzero(rng.random(n_book) < 0.04):
        j = int(rng.integers(0, n_book))
        titles[i] = titles[j].split(" (")[0] + (": Special Edition" if rng.random() < 0.5 else "")

    genre_lists, shelf_lists = [], []
    sp = popularity(rng, len(shelves), 0.6)
    n_sh = rng.integers(3, 12, n_book)
    shelf_draw = choose(rng, sp, int(n_sh.sum()))
    pos = 0
    for i in range(n_book):
        main = int(author_genre[author[i]]) if rng.random() < 0.8 else int(rng.integers(0, len(genres)))
        extra = [int(x) for x in rng.integers(0, len(genres), int(rng.integers(0, 3)))]
        genre_lists.append([genres[k] for k in dict.fromkeys([main] + extra)])
        shelf_lists.append(["to-read"] + [shelves[k] for k in dict.fromkeys(shelf_draw[pos:pos + n_sh[i]])
                                          if shelves[k] != "to-read"])
        pos += n_sh[i]
    fmt = choose(rng, popularity(rng, len(formats), 1.0), n_book)
    lang = np.where(rng.random(n_book) < 0.85, author_lang[author], rng.integers(0, len(_LANGS), n_book))
    year = (1950 + np.floor(73 * rng.beta(4, 1.3, n_book))).astype(np.int64)
    pages = np.maximum(12, rng.lognormal(5.5, 0.6, n_book).astype(np.int64))
    has_pages = rng.random(n_book) < 0.9
    ebook = rng.random(n_book) < 0.3

    ids = unique_numeric_ids(rng, n_book + n_author + n_series, 1000)
    book_ids = [str(x) for x in ids[:n_book]]
    g.set_nodes("book", book_ids, {
        "country_code": [_COUNTRY[k] for k in rng.integers(0, len(_COUNTRY), n_book)],
        "language_code": [_LANGS[k] for k in lang],
        "is_ebook": ["true" if e else "false" for e in ebook],
        "title": titles, "description": descriptions,
        "format": [formats[k] for k in fmt],
        "num_pages": [int(p) if h else None for p, h in zip(pages, has_pages)],
        "publication_year": [int(y) for y in year],
        "url": [f"https://www.goodreads.com/book/show/{b}" for b in book_ids],
        "popular_shelves": shelf_lists, "genres": genre_lists})
    g.set_nodes("author", [str(x) for x in ids[n_book:n_book + n_author]],
                {"name": _person_names(rng, n_author)})
    pub_words = words("publishers")
    pub_names = [pub_words[k] if k < len(pub_words)
                 else f"{vocab[k % len(vocab)]} {('Press', 'Books', 'House', 'Publishing')[k % 4]}"
                 for k in range(n_pub)]
    g.set_nodes("publisher", [f"pub_{k}" for k in range(n_pub)], {"name": pub_names})
    g.set_nodes("series", [str(x) for x in ids[n_book + n_author:]], {
        "title": series_titles,
        "description": [f"A series of {genres[int(rng.integers(0, len(genres)))]} books." for _ in range(n_series)]})

    # Relations.
    extra = rng.random(n_book) < 0.15
    co = choose(rng, ap, n_book)
    src = np.r_[np.arange(n_book), np.flatnonzero(extra)]
    dst = np.r_[author, co[extra]]
    src, dst = dedupe(src, dst, n_author)
    g.add_both("book", "author", src, dst, reverse="book")
    publisher = np.where(rng.random(n_book) < 0.7, author_pub[author], choose(rng, pp, n_book))
    g.add_both("book", "publisher", np.arange(n_book), publisher, reverse="book")
    in_series = np.flatnonzero(series_of >= 0)
    g.add_both("book", "series", in_series, series_of[in_series], reverse="book")
    genre_order = np.lexsort((rng.random(n_book), author, author_genre[author]))
    k = counts_per_node(rng, n_book, 6.0, high=18, tail=2.0)
    s = expand(k)
    d = local_targets(rng, s, genre_order, 30, 0.15, popularity(rng, n_book, 0.8))
    g.add_edges("book", "similar_books", *dedupe(s, d, n_book, drop_self=True))
    return g
