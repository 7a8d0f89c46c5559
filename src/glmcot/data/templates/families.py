"""Template families shared by the domains: one feature, one neighbour list, one degree."""

from __future__ import annotations

from collections.abc import Callable

from glmcot.data.templates.base import Ctx, Instance, PlanBuilder, Reject, TemplateSet, fmt, q


def feature(ts: TemplateSet, template: str, level: str, anchor: str, name: str, slot: str,
            what: str, is_list: bool = False, max_chars: int = 0,
            extra: Callable | None = None):
    """Answer = one feature of the node the question names."""
    def build(c: Ctx, i: int) -> Instance:
        value = c.f(anchor, name, i)
        if value is None or value == [] or value == "":
            raise Reject("feature absent")
        s = c.surface(anchor, i, max_chars=max_chars)
        shown = f'", ".join(NodeFeature(node, {q(name)}))' if is_list else f"NodeFeature(node, {q(name)})"
        p = PlanBuilder()
        p.step(f"the {what} of {short(s)}",
               f"node = RetrieveNode({q(s)})\nprint({shown})")
        p.act(f"I need to find the {anchor.replace('_', ' ')} node first.", f"RetrieveNode[{s}]")
        p.act(f"Now I read its {name} feature.", f"NodeFeature[$0, {name}]")
        return Instance({slot: s, **(extra(c, i) if extra else {})}, fmt(value), p.finish(), {slot: c.id(anchor, i)})
    ts.add(template, level, anchor, True)(build)


def neighbour_feature(ts: TemplateSet, template: str, level: str, anchor: str, relation: str,
                      name: str, slot: str, what: str, max_chars: int = 0,
                      extra: Callable | None = None):
    """Answer = a feature of each neighbour along one relation, joined."""
    def build(c: Ctx, i: int) -> Instance:
        target = c.target(anchor, relation)
        nbrs = c.nb(anchor, relation, i)
        values = [c.f(target, name, j) for j in nbrs]
        if not values or any(v is None for v in values):
            raise Reject("no neighbours")
        s = c.surface(anchor, i, max_chars=max_chars)
        p = PlanBuilder()
        p.step(f"the {what} of {short(s)}",
               f"node = RetrieveNode({q(s)})\n"
               f"found = NeighbourCheck(node, {q(relation)})\n"
               f"print(\", \".join(NodeFeature(n, {q(name)}) for n in found))")
        p.act(f"I need to find the {anchor.replace('_', ' ')} node first.", f"RetrieveNode[{s}]")
        p.act(f"Next I list its {relation} neighbours.", f"NeighbourCheck[$0, {relation}]")
        p.act(f"Now I read the {name} of each of them.", f"NodeFeature[$1[*], {name}]")
        return Instance({slot: s, **(extra(c, i) if extra else {})}, ", ".join(str(v) for v in values), p.finish(),
                        {slot: c.id(anchor, i)})
    ts.add(template, level, anchor, True)(build)


def degree(ts: TemplateSet, template: str, level: str, anchor: str, relation: str, slot: str,
           what: str, zero_rate: float = 0.15, max_chars: int = 0,
           extra: Callable | None = None):
    """Answer = the number of neighbours along one relation."""
    def build(c: Ctx, i: int) -> Instance:
        d = c.deg(anchor, relation, i)
        if d == 0 and c.rng.random() > zero_rate:
            raise Reject("prefer non-zero counts")
        s = c.surface(anchor, i, max_chars=max_chars)
        p = PlanBuilder()
        p.step(f"the number of {what} of {short(s)}",
               f"node = RetrieveNode({q(s)})\nprint(NodeDegree(node, {q(relation)}))")
        p.act(f"I need to find the {anchor.replace('_', ' ')} node first.", f"RetrieveNode[{s}]")
        p.act(f"Now I count its {relation} neighbours.", f"NodeDegree[$0, {relation}]")
        return Instance({slot: s, **(extra(c, i) if extra else {})}, str(d), p.finish(), {slot: c.id(anchor, i)})
    ts.add(template, level, anchor, True)(build)


def short(text: str, limit: int = 80) -> str:
    """A mention of the entity fit for a missing-information sentence."""
    if len(text) <= limit:
        return f'"{text}"'
    cut = text[:limit]
    return f'"{cut[: cut.rfind(" ")] if " " in cut else cut}..."'
