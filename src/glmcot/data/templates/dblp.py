"""dblp templates (GRBench qid blocks 0-14)."""

from __future__ import annotations

from collections import Counter

from glmcot.data.templates.base import Ctx, Instance, PlanBuilder, Reject, TemplateSet, q
from glmcot.data.templates.families import degree, feature, neighbour_feature, short

T = TemplateSet("dblp")

neighbour_feature(T, "dblp/0", "easy", "paper", "author", "name", "title", "authors")
feature(T, "dblp/1", "easy", "author", "organization", "name", "organization of the researcher")
neighbour_feature(T, "dblp/2", "easy", "paper", "venue", "name", "title", "venue")
degree(T, "dblp/8", "easy", "paper", "cited_by", "title", "papers citing the paper")
degree(T, "dblp/9", "easy", "paper", "reference", "title", "papers cited by the paper")
degree(T, "dblp/11", "easy", "author", "paper", "name", "papers written by",
       extra=lambda c, i: {"organization": c.f("author", "organization", i)})


def _name(c: Ctx, a: int) -> str:
    return c.f("author", "name", a)


def _org(c: Ctx, a: int) -> str:
    return c.f("author", "organization", a) or "an unknown organization"


def _papers_step(p: PlanBuilder, name: str, extra: str = "") -> None:
    p.step(f"the papers written by {short(name)}{extra}",
           f"author = RetrieveNode({q(name)})\n"
           f"for paper in NeighbourCheck(author, \"paper\"):\n"
           f"    print(NodeFeature(paper, \"title\"))")


def _author_unique_name(c: Ctx, a: int) -> str:
    """Author name for a question; the plan retrieves by it (Graph-CoT embeds names only)."""
    name = _name(c, a)
    if not name:
        raise Reject("no name")
    return name


@T.add("dblp/3", "medium", "paper", False)
def coauthors_on_paper(c: Ctx, i: int) -> Instance:
    authors = list(c.nb("paper", "author", i))
    if len(authors) < 2:
        raise Reject("single author")
    names = [_name(c, a) for a in authors]
    if len(set(names)) < len(names):
        raise Reject("two authors share a name")
    a = c.pick(authors)
    name = _name(c, a)
    answer = ", ".join(n for x, n in zip(authors, names) if x != a)
    title = c.surface("paper", i)
    p = PlanBuilder()
    p.step(f"the authors of the paper {short(title)}",
           f"paper = RetrieveNode({q(title)})\n"
           f"print(\", \".join(NodeFeature(a, \"name\") for a in NeighbourCheck(paper, \"author\")))")
    p.step(f"the co-authors of {name} on {short(title)}, without {name}",
           f"paper = RetrieveNode({q(title)})\n"
           f"names = [NodeFeature(a, \"name\") for a in NeighbourCheck(paper, \"author\")]\n"
           f"print(\", \".join(n for n in names if n != {q(name)}))")
    p.act("I need to find the paper node first.", f"RetrieveNode[{title}]")
    p.act("Next I list the paper's authors.", "NeighbourCheck[$0, author]")
    p.act("Now I read their names and leave out the given author.", "NodeFeature[$1[*], name]")
    return Instance({"name": name, "organization": _org(c, a), "title": title}, answer,
                    p.finish(), {"title": c.id("paper", i), "name": c.id("author", a)})


@T.add("dblp/4", "medium", "author", False)
def author_of_both(c: Ctx, i: int) -> Instance:
    papers = list(c.nb("author", "paper", i))
    if len(papers) < 2:
        raise Reject("fewer than two papers")
    x, y = c.rng.choice(papers, 2, replace=False)
    ax, ay = list(c.nb("paper", "author", x)), set(c.nb("paper", "author", y))
    both = [a for a in ax if a in ay]
    t1, t2 = c.surface("paper", x), c.surface("paper", y)
    if t1.lower() == t2.lower():
        raise Reject("same title")
    p = PlanBuilder()
    p.step(f"the authors of the paper {short(t1)}",
           f"paper = RetrieveNode({q(t1)})\n"
           f"print(\", \".join(NodeFeature(a, \"name\") for a in NeighbourCheck(paper, \"author\")))")
    p.step(f"which authors of {short(t1)} also wrote {short(t2)}",
           f"first = NeighbourCheck(RetrieveNode({q(t1)}), \"author\")\n"
           f"second = set(NeighbourCheck(RetrieveNode({q(t2)}), \"author\"))\n"
           f"print(\", \".join(NodeFeature(a, \"name\") for a in first if a in second))")
    p.act("I need to find the first paper.", f"RetrieveNode[{t1}]")
    p.act("And the second paper.", f"RetrieveNode[{t2}]")
    p.act("I list the authors of the first paper.", "NeighbourCheck[$0, author]")
    p.act("And the authors of the second paper.", "NeighbourCheck[$1, author]")
    p.act("I read the names of the first paper's authors to find the shared ones.",
          "NodeFeature[$2[*], name]")
    return Instance({"title": t1, "title2": t2}, ", ".join(_name(c, a) for a in both), p.finish(),
                    {"title": c.id("paper", x), "title2": c.id("paper", y)})


def _coauthor_counts(c: Ctx, a: int) -> Counter:
    counts: Counter = Counter()
    for paper in c.nb("author", "paper", a):
        for b in c.nb("paper", "author", paper):
            if b != a:
                counts[int(b)] += 1
    return counts


@T.add("dblp/5", "medium", "author", False)
def closest_collaborator(c: Ctx, i: int) -> Instance:
    counts = _coauthor_counts(c, i)
    best = unique_best(counts)
    name = _author_unique_name(c, i)
    p = PlanBuilder()
    _papers_step(p, name)
    p.step(f"the co-author who wrote the most papers with {name}",
           f"author = RetrieveNode({q(name)})\n"
           f"counts = {{}}\n"
           f"for paper in NeighbourCheck(author, \"paper\"):\n"
           f"    for other in NeighbourCheck(paper, \"author\"):\n"
           f"        if other != author:\n"
           f"            counts[other] = counts.get(other, 0) + 1\n"
           f"best = max(counts, key=counts.get)\n"
           f"print(NodeFeature(best, \"name\"))")
    p.act("I need to find the author first.", f"RetrieveNode[{name}]")
    p.act("Next I list the author's papers.", "NeighbourCheck[$0, paper]")
    p.act("Then the authors of each paper, to count collaborations.", "NeighbourCheck[$1[*], author]")
    p.act("I read the names of the collaborators.", "NodeFeature[$2[*], name]")
    return Instance({"name": name, "organization": _org(c, i)}, _name(c, best), p.finish(),
                    {"name": c.id("author", i)})


def unique_best(counts: Counter):
    ranked = counts.most_common(2)
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        raise Reject("no unique best")
    return ranked[0][0]


@T.add("dblp/6", "medium", "author", False)
def collaborators_in_year(c: Ctx, i: int) -> Instance:
    papers = list(c.nb("author", "paper", i))
    if not papers:
        raise Reject("no papers")
    year = int(c.f("paper", "year", c.pick(papers)))
    others = {int(b) for p_ in papers if c.f("paper", "year", p_) == year
              for b in c.nb("paper", "author", p_) if b != i}
    name = _author_unique_name(c, i)
    p = PlanBuilder()
    p.step(f"the papers {name} published in {year}",
           f"author = RetrieveNode({q(name)})\n"
           f"for paper in NeighbourCheck(author, \"paper\"):\n"
           f"    if NodeFeature(paper, \"year\") == {year}:\n"
           f"        print(NodeFeature(paper, \"title\"))")
    p.step(f"how many distinct collaborators {name} had on papers from {year}",
           f"author = RetrieveNode({q(name)})\n"
           f"people = set()\n"
           f"for paper in NeighbourCheck(author, \"paper\"):\n"
           f"    if NodeFeature(paper, \"year\") == {year}:\n"
           f"        people.update(a for a in NeighbourCheck(paper, \"author\") if a != author)\n"
           f"print(len(people))")
    p.act("I need to find the author first.", f"RetrieveNode[{name}]")
    p.act("Next I list the author's papers.", "NeighbourCheck[$0, paper]")
    p.act(f"I check the year of each paper to keep those from {year}.", "NodeFeature[$1[*], year]")
    p.act("Then I list the authors of the papers.", "NeighbourCheck[$1[*], author]")
    return Instance({"name": name, "organization": _org(c, i), "year": year}, str(len(others)),
                    p.finish(), {"name": c.id("author", i)})


def _coauthor(c: Ctx, i: int) -> int:
    counts = _coauthor_counts(c, i)
    if not counts:
        raise Reject("no co-authors")
    keys = sorted(counts)
    b = keys[int(c.rng.integers(0, len(keys)))]
    if _name(c, b) == _name(c, i):
        raise Reject("same names")
    return b


@T.add("dblp/7", "medium", "author", False)
def papers_together(c: Ctx, i: int) -> Instance:
    b = _coauthor(c, i)
    joint = set(map(int, c.nb("author", "paper", i))) & set(map(int, c.nb("author", "paper", b)))
    n1, n2 = _author_unique_name(c, i), _author_unique_name(c, b)
    p = PlanBuilder()
    _papers_step(p, n1)
    p.step(f"how many papers {n1} and {n2} wrote together",
           f"first = set(NeighbourCheck(RetrieveNode({q(n1)}), \"paper\"))\n"
           f"second = set(NeighbourCheck(RetrieveNode({q(n2)}), \"paper\"))\n"
           f"print(len(first & second))")
    p.act("I need to find the first author.", f"RetrieveNode[{n1}]")
    p.act("And the second author.", f"RetrieveNode[{n2}]")
    p.act("I list the first author's papers.", "NeighbourCheck[$0, paper]")
    p.act("And the second author's papers, to count the shared ones.", "NeighbourCheck[$1, paper]")
    return Instance({"name": n1, "organization": _org(c, i), "name2": n2, "organization2": _org(c, b)},
                    str(len(joint)), p.finish(), {"name": c.id("author", i), "name2": c.id("author", b)})


@T.add("dblp/10", "easy", "author", False)
def most_cited_paper(c: Ctx, i: int) -> Instance:
    papers = list(c.nb("author", "paper", i))
    if len(papers) < 2:
        raise Reject("one paper")
    counts = Counter({int(p_): c.deg("paper", "cited_by", p_) for p_ in papers})
    best = unique_best(counts)
    name = _author_unique_name(c, i)
    p = PlanBuilder()
    _papers_step(p, name)
    p.step(f"which paper of {name} is cited the most",
           f"author = RetrieveNode({q(name)})\n"
           f"papers = NeighbourCheck(author, \"paper\")\n"
           f"best = max(papers, key=lambda paper: NodeDegree(paper, \"cited_by\"))\n"
           f"print(NodeFeature(best, \"title\"))")
    p.act("I need to find the author first.", f"RetrieveNode[{name}]")
    p.act("Next I list the author's papers.", "NeighbourCheck[$0, paper]")
    p.act("I count the citations of each paper.", "NodeDegree[$1[*], cited_by]")
    p.act("And read the titles to name the most cited one.", "NodeFeature[$1[*], title]")
    return Instance({"name": name, "organization": _org(c, i)}, c.f("paper", "title", best),
                    p.finish(), {"name": c.id("author", i)})


@T.add("dblp/12", "medium", "author", False)
def venue_of_collaboration(c: Ctx, i: int) -> Instance:
    b = _coauthor(c, i)
    joint = [p_ for p_ in c.nb("author", "paper", i) if p_ in set(c.nb("author", "paper", b))]
    counts = Counter(int(c.nb("paper", "venue", p_)[0]) for p_ in joint)
    best = unique_best(counts)
    n1, n2 = _author_unique_name(c, i), _author_unique_name(c, b)
    p = PlanBuilder()
    p.step(f"the papers {n1} and {n2} wrote together",
           f"second = set(NeighbourCheck(RetrieveNode({q(n2)}), \"paper\"))\n"
           f"for paper in NeighbourCheck(RetrieveNode({q(n1)}), \"paper\"):\n"
           f"    if paper in second:\n"
           f"        print(NodeFeature(paper, \"title\"))")
    p.step(f"the venue where {n1} and {n2} published most of their joint papers",
           f"second = set(NeighbourCheck(RetrieveNode({q(n2)}), \"paper\"))\n"
           f"counts = {{}}\n"
           f"for paper in NeighbourCheck(RetrieveNode({q(n1)}), \"paper\"):\n"
           f"    if paper in second:\n"
           f"        for venue in NeighbourCheck(paper, \"venue\"):\n"
           f"            counts[venue] = counts.get(venue, 0) + 1\n"
           f"print(NodeFeature(max(counts, key=counts.get), \"name\"))")
    p.act("I need to find the first author.", f"RetrieveNode[{n1}]")
    p.act("And the second author.", f"RetrieveNode[{n2}]")
    p.act("I list the first author's papers.", "NeighbourCheck[$0, paper]")
    p.act("And the second author's papers to find the joint ones.", "NeighbourCheck[$1, paper]")
    p.act("I look up the venue of each of the first author's papers.", "NeighbourCheck[$2[*], venue]")
    p.act("And read the venue names.", "NodeFeature[$4[*], name]")
    return Instance({"name": n1, "organization": _org(c, i), "name2": n2, "organization2": _org(c, b)},
                    c.f("venue", "name", best), p.finish(),
                    {"name": c.id("author", i), "name2": c.id("author", b)})


def _bfs(c: Ctx, start: int, limit: bool, max_hops: int = 5, max_seen: int = 1500) -> dict[int, int]:
    """Hop distance in the co-author graph; neighbour lists cut to the primitive's bound if
    `limit` (so the gold plan, which only sees bounded lists, finds the same distance)."""
    def nbrs(t: str, rel: str, x: int):
        out = c.g.neighbors(t, rel, int(x))
        return out[:50] if limit else out
    dist = {start: 0}
    frontier = [start]
    for hop in range(1, max_hops + 1):
        nxt = []
        for a in frontier:
            for paper in nbrs("author", "paper", a):
                for b in nbrs("paper", "author", paper):
                    b = int(b)
                    if b not in dist:
                        dist[b] = hop
                        nxt.append(b)
                if len(dist) > max_seen:
                    raise Reject("neighbourhood too large")
        frontier = nxt
    return dist


@T.add("dblp/13", "medium", "author", False)
def degrees_of_separation(c: Ctx, i: int) -> Instance:
    full = _bfs(c, i, limit=False, max_hops=3)
    hops = int(c.rng.integers(1, 4))
    at = sorted(b for b, d in full.items() if d == hops)
    if not at:
        raise Reject("nobody at that distance")
    b = at[int(c.rng.integers(0, len(at)))]
    if _bfs(c, i, limit=True, max_hops=3).get(b) != hops:
        raise Reject("bounded lists change the distance")
    n1, n2 = _author_unique_name(c, i), _author_unique_name(c, b)
    if n1 == n2:
        raise Reject("same names")
    p = PlanBuilder()
    p.step(f"the direct collaborators of {n1}",
           f"author = RetrieveNode({q(n1)})\n"
           f"people = set()\n"
           f"for paper in NeighbourCheck(author, \"paper\"):\n"
           f"    people.update(a for a in NeighbourCheck(paper, \"author\") if a != author)\n"
           f"print(\", \".join(NodeFeature(a, \"name\") for a in people))")
    p.step(f"the fewest collaboration steps from {n1} to {n2}",
           f"start = RetrieveNode({q(n1)})\n"
           f"goal = RetrieveNode({q(n2)})\n"
           f"seen = {{start}}\n"
           f"frontier = [start]\n"
           f"hops = 0\n"
           f"found = start == goal\n"
           f"while frontier and not found and hops < 5:\n"
           f"    hops += 1\n"
           f"    reached = []\n"
           f"    for person in frontier:\n"
           f"        for paper in NeighbourCheck(person, \"paper\"):\n"
           f"            for other in NeighbourCheck(paper, \"author\"):\n"
           f"                if other not in seen:\n"
           f"                    seen.add(other)\n"
           f"                    reached.append(other)\n"
           f"                    found = found or other == goal\n"
           f"    frontier = reached\n"
           f"print(hops if found else \"not connected within 5 steps\")")
    p.act("I need to find the first author.", f"RetrieveNode[{n1}]")
    p.act("And the second author.", f"RetrieveNode[{n2}]")
    p.act("I list the first author's papers.", "NeighbourCheck[$0, paper]")
    p.act("And the co-authors on them, to search outward.", "NeighbourCheck[$2[*], author]")
    p.act("I read the collaborators' names.", "NodeFeature[$3[*], name]")
    return Instance({"name": n1, "organization": _org(c, i), "name2": n2, "organization2": _org(c, b)},
                    str(hops), p.finish(), {"name": c.id("author", i), "name2": c.id("author", b)})


@T.add("dblp/14", "medium", "author", False)
def top_keywords(c: Ctx, i: int) -> Instance:
    counts: Counter = Counter()
    for paper in c.nb("author", "paper", i):
        counts.update(list(dict.fromkeys(c.f("paper", "keywords", paper) or [])))
    if len(counts) < 3:
        raise Reject("fewer than three keywords")
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(ranked) > 3 and ranked[2][1] == ranked[3][1]:
        raise Reject("tie at third place")
    answer = ", ".join(k for k, _ in ranked[:3])
    name = _author_unique_name(c, i)
    p = PlanBuilder()
    p.step(f"the keywords of the papers written by {name}",
           f"author = RetrieveNode({q(name)})\n"
           f"for paper in NeighbourCheck(author, \"paper\"):\n"
           f"    print(\", \".join(NodeFeature(paper, \"keywords\")))")
    p.step(f"the three keywords that occur most often in {name}'s papers",
           f"author = RetrieveNode({q(name)})\n"
           f"counts = {{}}\n"
           f"for paper in NeighbourCheck(author, \"paper\"):\n"
           f"    for word in set(NodeFeature(paper, \"keywords\")):\n"
           f"        counts[word] = counts.get(word, 0) + 1\n"
           f"top = sorted(counts, key=lambda w: (-counts[w], w))[:3]\n"
           f"print(\", \".join(top))")
    p.act("I need to find the author first.", f"RetrieveNode[{name}]")
    p.act("Next I list the author's papers.", "NeighbourCheck[$0, paper]")
    p.act("I read the keywords of each paper and count them.", "NodeFeature[$1[*], keywords]")
    return Instance({"name": name, "organization": _org(c, i)}, answer, p.finish(),
                    {"name": c.id("author", i)})
