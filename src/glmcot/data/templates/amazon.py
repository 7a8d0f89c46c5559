"""amazon templates (GRBench qid blocks 0-15; 16-19 need user histories and ESCI queries)."""

from __future__ import annotations

from collections import Counter

from glmcot.data.templates.base import Ctx, Instance, PlanBuilder, Reject, TemplateSet, q
from glmcot.data.templates.families import degree, feature, neighbour_feature, short

T = TemplateSet("amazon")

neighbour_feature(T, "amazon/0", "easy", "item", "brand", "name", "title", "brand")
feature(T, "amazon/1", "easy", "item", "category", "title", "category", is_list=True)
feature(T, "amazon/2", "easy", "item", "price", "title", "price")
degree(T, "amazon/3", "easy", "item", "also_viewed_item", "title", "co-viewed items")
degree(T, "amazon/4", "easy", "item", "bought_together_item", "title", "items bought together with")
degree(T, "amazon/5", "easy", "item", "buy_after_viewing_item", "title", "items bought after viewing")
degree(T, "amazon/6", "easy", "item", "also_bought_item", "title", "also-bought items")
degree(T, "amazon/7", "easy", "brand", "item", "name", "items of the brand", zero_rate=0.0)

_WHAT = {"also_viewed_item": "co-viewed items", "bought_together_item": "items bought together with it"}


def _neighbours_step(p: PlanBuilder, title: str, relation: str) -> None:
    p.step(f"the {_WHAT[relation]} of {short(title)}",
           f"item = RetrieveNode({q(title)})\n"
           f"for other in NeighbourCheck(item, {q(relation)}):\n"
           f"    print(NodeFeature(other, \"title\"))")


@T.add("amazon/8", "medium", "item", False)
def same_brand_and_category(c: Ctx, i: int) -> Instance:
    category = c.f("item", "category", i)
    brands = c.nb("item", "brand", i)
    found = [c.f("item", "title", o) for b in brands for o in c.nb("brand", "item", b)
             if o != i and c.f("item", "category", o) == category]
    if not found:
        raise Reject("nothing else in that brand and category")
    title = c.surface("item", i)
    p = PlanBuilder()
    p.step(f"the brand and category of {short(title)}",
           f"item = RetrieveNode({q(title)})\n"
           f"print(\", \".join(NodeFeature(b, \"name\") for b in NeighbourCheck(item, \"brand\")))\n"
           f"print(\", \".join(NodeFeature(item, \"category\")))")
    p.step(f"the other items of the same brand with the same category as {short(title)}",
           f"item = RetrieveNode({q(title)})\n"
           f"category = NodeFeature(item, \"category\")\n"
           f"found = []\n"
           f"for brand in NeighbourCheck(item, \"brand\"):\n"
           f"    for other in NeighbourCheck(brand, \"item\"):\n"
           f"        if other != item and NodeFeature(other, \"category\") == category:\n"
           f"            found.append(NodeFeature(other, \"title\"))\n"
           f"print(\", \".join(found))")
    p.act("I need to find the item first.", f"RetrieveNode[{title}]")
    p.act("I read its category.", "NodeFeature[$0, category]")
    p.act("And find its brand.", "NeighbourCheck[$0, brand]")
    p.act("I list the brand's items.", "NeighbourCheck[$2[*], item]")
    p.act("And check the category of each.", "NodeFeature[$3[*], category]")
    p.act("Then I read the titles of the matching items.", "NodeFeature[$3[*], title]")
    return Instance({"title": title}, ", ".join(found), p.finish(), {"title": c.id("item", i)})


def _shared(c: Ctx, i: int, relation: str) -> Counter:
    counts: Counter = Counter()
    for n in c.nb("item", relation, i):
        for o in c.nb("item", relation, n):
            if o != i:
                counts[int(o)] += 1
    return counts


def _sharing_template(template: str, relation: str, threshold: int):
    @T.add(template, "medium", "item", False)
    def build(c: Ctx, i: int) -> Instance:
        counts = _shared(c, i, relation)   # insertion order = first-seen order, as in the plan
        found = [o for o, k in counts.items() if k > threshold]
        if not found:
            raise Reject("no item shares enough")
        title = c.surface("item", i)
        p = PlanBuilder()
        _neighbours_step(p, title, relation)
        p.step(f"the items that share more than {threshold} {_WHAT[relation].split(' with')[0]} "
               f"with {short(title)}",
               f"item = RetrieveNode({q(title)})\n"
               f"counts = {{}}\n"
               f"for n in NeighbourCheck(item, {q(relation)}):\n"
               f"    for other in NeighbourCheck(n, {q(relation)}):\n"
               f"        if other != item:\n"
               f"            counts[other] = counts.get(other, 0) + 1\n"
               f"print(\", \".join(NodeFeature(o, \"title\") for o in counts if counts[o] > {threshold}))")
        p.act("I need to find the item first.", f"RetrieveNode[{title}]")
        p.act(f"I list its {relation} neighbours.", f"NeighbourCheck[$0, {relation}]")
        p.act("And theirs, to count the shared ones.", f"NeighbourCheck[$1[*], {relation}]")
        p.act("I read the titles of the candidates.", "NodeFeature[$2[*], title]")
        return Instance({"title": title, "n": threshold},
                        ", ".join(c.f("item", "title", o) for o in found), p.finish(),
                        {"title": c.id("item", i)})
    return build


_sharing_template("amazon/9", "also_viewed_item", 4)
_sharing_template("amazon/10", "bought_together_item", 1)


@T.add("amazon/11", "medium", "item", False)
def sharing_bought_together(c: Ctx, i: int) -> Instance:
    counts = _shared(c, i, "bought_together_item")
    if not counts and c.rng.random() > 0.15:
        raise Reject("prefer non-zero counts")
    if not len(c.nb("item", "bought_together_item", i)):
        raise Reject("nothing bought together")
    title = c.surface("item", i)
    p = PlanBuilder()
    _neighbours_step(p, title, "bought_together_item")
    p.step(f"how many other items share a bought-together item with {short(title)}",
           f"item = RetrieveNode({q(title)})\n"
           f"others = set()\n"
           f"for n in NeighbourCheck(item, \"bought_together_item\"):\n"
           f"    others.update(o for o in NeighbourCheck(n, \"bought_together_item\") if o != item)\n"
           f"print(len(others))")
    p.act("I need to find the item first.", f"RetrieveNode[{title}]")
    p.act("I list the items bought together with it.", "NeighbourCheck[$0, bought_together_item]")
    p.act("And the items bought together with each of those.", "NeighbourCheck[$1[*], bought_together_item]")
    return Instance({"title": title}, str(len(counts)), p.finish(), {"title": c.id("item", i)})


def _average_template(template: str, relation: str):
    @T.add(template, "medium", "item", False)
    def build(c: Ctx, i: int) -> Instance:
        prices = [c.f("item", "price", o) for o in c.nb("item", relation, i)]
        if not prices or any(x is None for x in prices):
            raise Reject("a neighbour has no price (NodeFeature would fail on it)")
        title = c.surface("item", i)
        p = PlanBuilder()
        p.step(f"the prices of the {_WHAT[relation]} of {short(title)}",
               f"item = RetrieveNode({q(title)})\n"
               f"for other in NeighbourCheck(item, {q(relation)}):\n"
               f"    print(NodeFeature(other, \"title\"), NodeFeature(other, \"price\"))")
        p.step(f"the average price of the {_WHAT[relation]} of {short(title)}",
               f"item = RetrieveNode({q(title)})\n"
               f"prices = []\n"
               f"for other in NeighbourCheck(item, {q(relation)}):\n"
               f"    prices.append(NodeFeature(other, \"price\"))\n"
               f"print(f\"{{sum(prices) / len(prices):.2f}}\")")
        p.act("I need to find the item first.", f"RetrieveNode[{title}]")
        p.act(f"I list its {relation} neighbours.", f"NeighbourCheck[$0, {relation}]")
        p.act("And read their prices to average them.", "NodeFeature[$1[*], price]")
        return Instance({"title": title}, f"{sum(prices) / len(prices):.2f}", p.finish(),
                        {"title": c.id("item", i)})
    return build


_average_template("amazon/12", "bought_together_item")
_average_template("amazon/13", "also_viewed_item")


def _category_template(template: str, relation: str):
    @T.add(template, "medium", "item", False)
    def build(c: Ctx, i: int) -> Instance:
        counts: Counter = Counter()
        for o in c.nb("item", relation, i):
            counts.update(c.f("item", "category", o) or [])
        ranked = counts.most_common(2)
        if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
            raise Reject("no unique most common category")
        title = c.surface("item", i)
        p = PlanBuilder()
        _neighbours_step(p, title, relation)
        p.step(f"the most common category among the {_WHAT[relation]} of {short(title)}",
               f"item = RetrieveNode({q(title)})\n"
               f"counts = {{}}\n"
               f"for other in NeighbourCheck(item, {q(relation)}):\n"
               f"    for category in NodeFeature(other, \"category\"):\n"
               f"        counts[category] = counts.get(category, 0) + 1\n"
               f"print(max(counts, key=counts.get))")
        p.act("I need to find the item first.", f"RetrieveNode[{title}]")
        p.act(f"I list its {relation} neighbours.", f"NeighbourCheck[$0, {relation}]")
        p.act("And read their categories to count them.", "NodeFeature[$1[*], category]")
        return Instance({"title": title}, ranked[0][0], p.finish(), {"title": c.id("item", i)})
    return build


_category_template("amazon/14", "bought_together_item")
_category_template("amazon/15", "also_viewed_item")
