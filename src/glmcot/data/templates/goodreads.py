"""goodreads templates (GRBench qid blocks 0-22 except 18 and 21, which rank every book of a
genre in the whole graph: no primitive reaches them from a node; 23 needs user histories)."""

from __future__ import annotations

from collections import Counter

from glmcot.data.templates.base import Ctx, Instance, PlanBuilder, Reject, TemplateSet, q
from glmcot.data.templates.families import degree, feature, neighbour_feature, short

T = TemplateSet("goodreads")

neighbour_feature(T, "goodreads/0", "easy", "book", "author", "name", "title", "authors")
neighbour_feature(T, "goodreads/1", "easy", "book", "publisher", "name", "title", "publisher")
feature(T, "goodreads/2", "easy", "book", "popular_shelves", "title", "shelves", is_list=True)
feature(T, "goodreads/3", "easy", "book", "genres", "title", "genres", is_list=True)
neighbour_feature(T, "goodreads/4", "easy", "book", "series", "title", "title", "series")
feature(T, "goodreads/5", "easy", "book", "publication_year", "title", "publication year")
feature(T, "goodreads/6", "easy", "book", "num_pages", "title", "number of pages")
feature(T, "goodreads/7", "easy", "book", "is_ebook", "title", "e-book flag")
feature(T, "goodreads/8", "easy", "book", "language_code", "title", "language")
degree(T, "goodreads/13", "easy", "author", "book", "name", "books written by", zero_rate=0.0)
degree(T, "goodreads/14", "easy", "book", "similar_books", "title", "books similar to")
degree(T, "goodreads/15", "easy", "publisher", "book", "name", "books published by", zero_rate=0.0)
degree(T, "goodreads/16", "easy", "series", "book", "title", "books in the series", zero_rate=0.0)


def _authors_books_step(p: PlanBuilder, title: str) -> None:
    p.step(f"the author of {short(title)} and the other books by that author",
           f"book = RetrieveNode({q(title)})\n"
           f"for author in NeighbourCheck(book, \"author\"):\n"
           f"    print(NodeFeature(author, \"name\"))\n"
           f"    for other in NeighbourCheck(author, \"book\"):\n"
           f"        print(\"-\", NodeFeature(other, \"title\"))")


def _same_author_template(template: str, what: str, key: str, code_key: str):
    """Books by the same author(s) that also match on `key` (publisher list or main genre)."""
    @T.add(template, "medium", "book", False)
    def build(c: Ctx, i: int) -> Instance:
        def signature(b):
            if key == "publisher":
                return [int(x) for x in c.nb("book", "publisher", b)]
            return c.f("book", "genres", b)[0]
        mine = signature(i)
        found: list[int] = []
        for a in c.nb("book", "author", i):
            for b in c.nb("author", "book", a):
                if b != i and int(b) not in found and signature(b) == mine:
                    found.append(int(b))
        if not found:
            raise Reject("no such book")
        title = c.surface("book", i)
        p = PlanBuilder()
        _authors_books_step(p, title)
        p.step(f"the books by the same author as {short(title)} with the same {what}",
               f"book = RetrieveNode({q(title)})\n"
               f"mine = {code_key.format(x='book')}\n"
               f"found = []\n"
               f"for author in NeighbourCheck(book, \"author\"):\n"
               f"    for other in NeighbourCheck(author, \"book\"):\n"
               f"        if other != book and other not in found and {code_key.format(x='other')} == mine:\n"
               f"            found.append(other)\n"
               f"print(\", \".join(NodeFeature(b, \"title\") for b in found))")
        p.act("I need to find the book first.", f"RetrieveNode[{title}]")
        p.act("I find its author.", "NeighbourCheck[$0, author]")
        p.act("And list the author's books.", "NeighbourCheck[$1[*], book]")
        if key == "publisher":
            p.act("I check the publisher of each of them.", "NeighbourCheck[$2[*], publisher]")
        else:
            p.act("I check the genres of each of them.", "NodeFeature[$2[*], genres]")
        p.act("And read the titles of the matching books.", "NodeFeature[$2[*], title]")
        return Instance({"title": title}, ", ".join(c.f("book", "title", b) for b in found),
                        p.finish(), {"title": c.id("book", i)})
    return build


_same_author_template("goodreads/9", "publisher", "publisher", "NeighbourCheck({x}, \"publisher\")")
_same_author_template("goodreads/10", "main genre", "genre", "NodeFeature({x}, \"genres\")[0]")


def _first_author(c: Ctx, i: int) -> int:
    authors = c.nb("book", "author", i)
    if len(authors) != 1:
        raise Reject("ask only about single-author books")
    return int(authors[0])


@T.add("goodreads/11", "medium", "book", False)
def earliest_book(c: Ctx, i: int) -> Instance:
    a = _first_author(c, i)
    books = c.nb("author", "book", a)
    years = Counter()
    for b in books:
        years[int(b)] = -c.f("book", "publication_year", b)
    ranked = years.most_common(2)
    if len(ranked) < 2 or ranked[0][1] == ranked[1][1]:
        raise Reject("no unique earliest book")
    title = c.surface("book", i)
    p = PlanBuilder()
    _authors_books_step(p, title)
    p.step(f"which book by the author of {short(title)} was published first",
           f"book = RetrieveNode({q(title)})\n"
           f"author = NeighbourCheck(book, \"author\")[0]\n"
           f"books = NeighbourCheck(author, \"book\")\n"
           f"first = min(books, key=lambda b: NodeFeature(b, \"publication_year\"))\n"
           f"print(NodeFeature(first, \"title\"))")
    p.act("I need to find the book first.", f"RetrieveNode[{title}]")
    p.act("I find its author.", "NeighbourCheck[$0, author]")
    p.act("And list the author's books.", "NeighbourCheck[$1[*], book]")
    p.act("I read their publication years.", "NodeFeature[$2[*], publication_year]")
    p.act("And their titles, to name the earliest.", "NodeFeature[$2[*], title]")
    return Instance({"title": title}, c.f("book", "title", ranked[0][0]), p.finish(),
                    {"title": c.id("book", i)})


@T.add("goodreads/12", "medium", "book", False)
def other_series(c: Ctx, i: int) -> Instance:
    a = _first_author(c, i)
    own = {int(s) for s in c.nb("book", "series", i)}
    found: list[int] = []
    for b in c.nb("author", "book", a):
        for s in c.nb("book", "series", b):
            if int(s) not in own and int(s) not in found:
                found.append(int(s))
    if not found:
        raise Reject("no other series")
    title = c.surface("book", i)
    p = PlanBuilder()
    _authors_books_step(p, title)
    p.step(f"the series of the author of {short(title)} other than that book's own series",
           f"book = RetrieveNode({q(title)})\n"
           f"own = NeighbourCheck(book, \"series\")\n"
           f"author = NeighbourCheck(book, \"author\")[0]\n"
           f"found = []\n"
           f"for other in NeighbourCheck(author, \"book\"):\n"
           f"    for series in NeighbourCheck(other, \"series\"):\n"
           f"        if series not in own and series not in found:\n"
           f"            found.append(series)\n"
           f"print(\", \".join(NodeFeature(s, \"title\") for s in found))")
    p.act("I need to find the book first.", f"RetrieveNode[{title}]")
    p.act("I look up its own series.", "NeighbourCheck[$0, series]")
    p.act("I find its author.", "NeighbourCheck[$0, author]")
    p.act("And list the author's books.", "NeighbourCheck[$2[*], book]")
    p.act("I look up the series of each book.", "NeighbourCheck[$3[*], series]")
    p.act("And read the series titles.", "NodeFeature[$4[*], title]")
    return Instance({"title": title}, ", ".join(c.f("series", "title", s) for s in found),
                    p.finish(), {"title": c.id("book", i)})


@T.add("goodreads/17", "medium", "publisher", False)
def authors_of_publisher(c: Ctx, i: int) -> Instance:
    books = c.nb("publisher", "book", i)
    if not len(books):
        raise Reject("no books")
    authors = {int(a) for b in books for a in c.nb("book", "author", b)}
    name = c.surface("publisher", i)
    p = PlanBuilder()
    p.step(f"the books published by {short(name)}",
           f"publisher = RetrieveNode({q(name)})\n"
           f"for book in NeighbourCheck(publisher, \"book\"):\n"
           f"    print(NodeFeature(book, \"title\"))")
    p.step(f"how many different authors published with {short(name)}",
           f"publisher = RetrieveNode({q(name)})\n"
           f"authors = set()\n"
           f"for book in NeighbourCheck(publisher, \"book\"):\n"
           f"    authors.update(NeighbourCheck(book, \"author\"))\n"
           f"print(len(authors))")
    p.act("I need to find the publisher first.", f"RetrieveNode[{name}]")
    p.act("I list its books.", "NeighbourCheck[$0, book]")
    p.act("And the authors of each book, to count distinct ones.", "NeighbourCheck[$1[*], author]")
    return Instance({"name": name}, str(len(authors)), p.finish(), {"name": c.id("publisher", i)})


def _author_mode_template(template: str, feature: str, what: str, is_list: bool):
    @T.add(template, "medium", "author", False)
    def build(c: Ctx, i: int) -> Instance:
        counts: Counter = Counter()
        for b in c.nb("author", "book", i):
            value = c.f("book", feature, b)
            if value is None:
                raise Reject("a book lacks the feature")
            counts.update(value if is_list else [value])
        ranked = counts.most_common(2)
        if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
            raise Reject("no unique most common value")
        name = c.surface("author", i)
        loop = (f"    for value in NodeFeature(book, {q(feature)}):\n"
                f"        counts[value] = counts.get(value, 0) + 1\n") if is_list else (
                f"    value = NodeFeature(book, {q(feature)})\n"
                f"    counts[value] = counts.get(value, 0) + 1\n")
        p = PlanBuilder()
        p.step(f"the books written by {short(name)}",
               f"author = RetrieveNode({q(name)})\n"
               f"for book in NeighbourCheck(author, \"book\"):\n"
               f"    print(NodeFeature(book, \"title\"))")
        p.step(f"the most common {what} among the books of {short(name)}",
               f"author = RetrieveNode({q(name)})\n"
               f"counts = {{}}\n"
               f"for book in NeighbourCheck(author, \"book\"):\n"
               + loop +
               "print(max(counts, key=counts.get))")
        p.act("I need to find the author first.", f"RetrieveNode[{name}]")
        p.act("I list the author's books.", "NeighbourCheck[$0, book]")
        p.act(f"And read the {feature} of each book to count them.", f"NodeFeature[$1[*], {feature}]")
        return Instance({"name": name}, str(ranked[0][0]), p.finish(), {"name": c.id("author", i)})
    return build


_author_mode_template("goodreads/19", "format", "format", False)
_author_mode_template("goodreads/20", "genres", "genre", True)
_author_mode_template("goodreads/22", "language_code", "language", False)
