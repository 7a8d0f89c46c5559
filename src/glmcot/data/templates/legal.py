"""legal templates (GRBench qid blocks 0-9 and 12-15; 10-11 look a case up by its name, which no
node's retrieval text holds; 16-17 need LegalBench sentences)."""

from __future__ import annotations

from collections import Counter

from glmcot.data.templates.base import Ctx, Instance, PlanBuilder, Reject, TemplateSet, q
from glmcot.data.templates.families import degree, feature, neighbour_feature, short

T = TemplateSet("legal")
QUOTE = 220   # questions quote the first ~220 characters of an opinion or syllabus, as GRBench does

feature(T, "legal/0", "easy", "court", "start_date", "name", "start date")
feature(T, "legal/1", "easy", "court", "end_date", "name", "end date")
feature(T, "legal/2", "easy", "court", "citation_string", "name", "citation string")
neighbour_feature(T, "legal/3", "easy", "docket", "court", "full_name", "pacer_id", "court")
feature(T, "legal/4", "easy", "opinion_cluster", "attorneys", "syllabus", "attorneys of the cluster",
        max_chars=QUOTE)
degree(T, "legal/8", "easy", "court", "docket", "name", "dockets of the court", zero_rate=0.0)
degree(T, "legal/9", "easy", "opinion", "cited_by", "text", "opinions citing the opinion",
       max_chars=QUOTE)
degree(T, "legal/12", "medium", "opinion_cluster", "opinion", "syllabus", "opinions in the cluster",
       zero_rate=0.0, max_chars=QUOTE)

_NOUN = {"opinion_cluster": "opinion cluster", "docket": "docket", "court": "court"}


def _path_template(template: str, anchor: str, slot: str, path: list[str], final: tuple[str, str],
                   what: str):
    """Follow single-neighbour relations from the anchor, then read a feature or a degree."""
    @T.add(template, "medium", anchor, False)
    def build(c: Ctx, i: int) -> Instance:
        node_type, node = anchor, i
        for relation in path:
            nbrs = c.nb(node_type, relation, node)
            if len(nbrs) != 1:
                raise Reject("not a single neighbour")
            node_type, node = c.target(node_type, relation), int(nbrs[0])
        kind, name = final
        if kind == "feature":
            value = c.f(node_type, name, node)
            if value is None:
                raise Reject("feature absent")
            answer = str(value)
        else:
            answer = str(c.deg(node_type, name, node))
        s = c.surface(anchor, i, max_chars=QUOTE)
        hops = "".join(f"node = NeighbourCheck(node, {q(r)})[0]\n" for r in path)
        read = (f"print(NodeFeature(node, {q(name)}))" if kind == "feature"
                else f"print(NodeDegree(node, {q(name)}))")
        first = c.target(anchor, path[0])
        p = PlanBuilder()
        p.step(f"the {_NOUN[first]} that {short(s, 60)} belongs to",
               f"node = RetrieveNode({q(s)})\n"
               f"print(NeighbourCheck(node, {q(path[0])}))")
        p.step(f"the {what} for {short(s, 60)}",
               f"node = RetrieveNode({q(s)})\n" + hops + read)
        k = p.act(f"I need to find the {anchor.replace('_', ' ')} node first.", f"RetrieveNode[{s}]")
        for relation in path:
            ref = f"${k}" if k == 0 else f"${k}[*]"
            k = p.act(f"I follow its {relation} link.", f"NeighbourCheck[{ref}, {relation}]")
        if kind == "feature":
            p.act(f"Now I read the {name}.", f"NodeFeature[${k}[*], {name}]")
        else:
            p.act(f"Now I count its {name} neighbours.", f"NodeDegree[${k}[*], {name}]")
        return Instance({slot: s}, answer, p.finish(), {slot: c.id(anchor, i)})
    return build


_path_template("legal/5", "opinion", "text", ["opinion_cluster"], ("feature", "judges"),
               "judges of the opinion cluster")
_path_template("legal/6", "opinion", "text", ["opinion_cluster", "docket"],
               ("feature", "pacer_case_id"), "PACER case id of the docket")
_path_template("legal/7", "opinion_cluster", "syllabus", ["docket", "court"],
               ("feature", "full_name"), "court of the cluster")
_path_template("legal/13", "opinion", "text", ["opinion_cluster"], ("degree", "opinion"),
               "number of opinions in the cluster")
_path_template("legal/14", "opinion", "text", ["opinion_cluster", "docket", "court"],
               ("feature", "full_name"), "court that issued the opinion")


def _court_of_opinion(c: Ctx, o: int) -> int:
    cluster = int(c.g.neighbors("opinion", "opinion_cluster", o)[0])
    docket = int(c.g.neighbors("opinion_cluster", "docket", cluster)[0])
    return int(c.g.neighbors("docket", "court", docket)[0])


@T.add("legal/15", "medium", "court", False)
def most_cited_court(c: Ctx, i: int) -> Instance:
    counts: Counter = Counter()
    for d in c.nb("court", "docket", i):
        for cl in c.nb("docket", "opinion_cluster", d):
            for o in c.nb("opinion_cluster", "opinion", cl):
                for r in c.nb("opinion", "reference", o):
                    counts[_court_of_opinion(c, int(r))] += 1
    ranked = counts.most_common(2)
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        raise Reject("no unique most cited court")
    s = c.surface("court", i)
    p = PlanBuilder()
    p.step(f"the opinions issued by {short(s)}",
           f"court = RetrieveNode({q(s)})\n"
           f"count = 0\n"
           f"for docket in NeighbourCheck(court, \"docket\"):\n"
           f"    for cluster in NeighbourCheck(docket, \"opinion_cluster\"):\n"
           f"        count += NodeDegree(cluster, \"opinion\")\n"
           f"print(count, \"opinions\")")
    p.step(f"the court whose opinions the judges of {short(s)} cite most often",
           f"court = RetrieveNode({q(s)})\n"
           f"counts = {{}}\n"
           f"for docket in NeighbourCheck(court, \"docket\"):\n"
           f"    for cluster in NeighbourCheck(docket, \"opinion_cluster\"):\n"
           f"        for opinion in NeighbourCheck(cluster, \"opinion\"):\n"
           f"            for cited in NeighbourCheck(opinion, \"reference\"):\n"
           f"                where = NeighbourCheck(cited, \"opinion_cluster\")[0]\n"
           f"                where = NeighbourCheck(where, \"docket\")[0]\n"
           f"                where = NeighbourCheck(where, \"court\")[0]\n"
           f"                counts[where] = counts.get(where, 0) + 1\n"
           f"print(NodeFeature(max(counts, key=counts.get), \"full_name\"))")
    p.act("I need to find the court first.", f"RetrieveNode[{s}]")
    p.act("I list its dockets.", "NeighbourCheck[$0, docket]")
    p.act("And their opinion clusters.", "NeighbourCheck[$1[*], opinion_cluster]")
    p.act("And the opinions in them.", "NeighbourCheck[$2[*], opinion]")
    p.act("I list the opinions they cite.", "NeighbourCheck[$3[*], reference]")
    p.act("And the clusters of the cited opinions.", "NeighbourCheck[$4[*], opinion_cluster]")
    p.act("Their dockets.", "NeighbourCheck[$5[*], docket]")
    p.act("And the courts of those dockets.", "NeighbourCheck[$6[*], court]")
    p.act("I read the court names to find the most frequent.", "NodeFeature[$7[*], full_name]")
    return Instance({"name": s}, c.f("court", "full_name", ranked[0][0]), p.finish(),
                    {"name": c.id("court", i)})
