"""biomedical templates (GRBench qid blocks 0-26, Hetionet metaedge names)."""

from __future__ import annotations

from collections import Counter

from glmcot.data.templates.base import Ctx, Instance, PlanBuilder, Reject, TemplateSet, q
from glmcot.data.templates.families import degree, neighbour_feature

T = TemplateSet("biomedical")

CAUSES = "Compound-causes-Side Effect"
PRESENTS = "Disease-presents-Symptom"
LOCALIZES = "Disease-localizes-Anatomy"
PALLIATES = "Compound-palliates-Disease"
TREATS = "Compound-treats-Disease"
INCLUDES = "Pharmacologic Class-includes-Compound"
GENE_DISEASE = {"down": "Disease-downregulates-Gene", "assoc": "Disease-associates-Gene",
                "up": "Disease-upregulates-Gene"}

neighbour_feature(T, "biomedical/0", "easy", "Compound", CAUSES, "name", "name", "side effects")
neighbour_feature(T, "biomedical/1", "easy", "Disease", PRESENTS, "name", "name", "symptoms")
neighbour_feature(T, "biomedical/2", "easy", "Gene", "Gene-participates-Biological Process", "name",
                  "name", "biological processes")
neighbour_feature(T, "biomedical/3", "easy", "Gene", "Gene-participates-Molecular Function", "name",
                  "name", "molecular functions")
neighbour_feature(T, "biomedical/4", "easy", "Gene", "Anatomy-downregulates-Gene", "name", "name",
                  "anatomy downregulated by the gene")
neighbour_feature(T, "biomedical/5", "easy", "Gene", "Anatomy-expresses-Gene", "name", "name",
                  "anatomy expressing the gene")
neighbour_feature(T, "biomedical/6", "easy", "Gene", "Anatomy-upregulates-Gene", "name", "name",
                  "anatomy upregulated by the gene")
degree(T, "biomedical/14", "easy", "Compound", "Compound-resembles-Compound", "name",
       "compounds resembling")
degree(T, "biomedical/15", "easy", "Disease", "Disease-resembles-Disease", "name",
       "diseases resembling")
degree(T, "biomedical/16", "easy", "Disease", TREATS, "name", "compounds treating")


def _name(c: Ctx, t: str, i: int) -> str:
    return c.f(t, "name", i)


@T.add("biomedical/7", "medium", "Compound", False)
def treats_both(c: Ctx, i: int) -> Instance:
    diseases = c.nb("Compound", TREATS, i)
    if len(diseases) < 2:
        raise Reject("treats fewer than two diseases")
    d1, d2 = (int(x) for x in c.rng.choice(diseases, 2, replace=False))
    second = set(map(int, c.nb("Disease", TREATS, d2)))
    both = [int(x) for x in c.nb("Disease", TREATS, d1) if int(x) in second]
    s1, s2 = c.surface("Disease", d1), c.surface("Disease", d2)
    p = PlanBuilder()
    p.step(f"the compounds that treat {s1}",
           f"disease = RetrieveNode({q(s1)})\n"
           f"print(\", \".join(NodeFeature(x, \"name\") for x in NeighbourCheck(disease, {q(TREATS)})))")
    p.step(f"the compounds that treat both {s1} and {s2}",
           f"first = NeighbourCheck(RetrieveNode({q(s1)}), {q(TREATS)})\n"
           f"second = NeighbourCheck(RetrieveNode({q(s2)}), {q(TREATS)})\n"
           f"print(\", \".join(NodeFeature(x, \"name\") for x in first if x in second))")
    p.act("I need to find the first disease.", f"RetrieveNode[{s1}]")
    p.act("And the second disease.", f"RetrieveNode[{s2}]")
    p.act("I list the compounds treating the first.", f"NeighbourCheck[$0, {TREATS}]")
    p.act("And those treating the second.", f"NeighbourCheck[$1, {TREATS}]")
    p.act("I read the names of the first list to report the shared ones.", "NodeFeature[$2[*], name]")
    return Instance({"disease": s1, "disease2": s2}, ", ".join(_name(c, "Compound", x) for x in both),
                    p.finish(), {"disease": c.id("Disease", d1), "disease2": c.id("Disease", d2)})


def _located_template(template: str, anchor: str, relation: str, slot: str, verb: str):
    """Diseases linked to the anchor (compound or gene) that localize in a given anatomy."""
    @T.add(template, "medium", anchor, False)
    def build(c: Ctx, i: int) -> Instance:
        diseases = [int(d) for d in c.nb(anchor, relation, i)]
        if not diseases:
            raise Reject("no linked disease")
        places = c.nb("Disease", LOCALIZES, c.pick(diseases))
        if not len(places):
            raise Reject("disease not localized")
        a = int(c.pick(places))
        found = [d for d in diseases if a in set(map(int, c.nb("Disease", LOCALIZES, d)))]
        s, where = c.surface(anchor, i), c.surface("Anatomy", a)
        p = PlanBuilder()
        p.step(f"the diseases that {s} {verb}",
               f"node = RetrieveNode({q(s)})\n"
               f"print(\", \".join(NodeFeature(d, \"name\") for d in NeighbourCheck(node, {q(relation)})))")
        p.step(f"which of the diseases that {s} {verb} are located in the {where}",
               f"node = RetrieveNode({q(s)})\n"
               f"place = RetrieveNode({q(where)})\n"
               f"found = [d for d in NeighbourCheck(node, {q(relation)})\n"
               f"         if place in NeighbourCheck(d, {q(LOCALIZES)})]\n"
               f"print(\", \".join(NodeFeature(d, \"name\") for d in found))")
        p.act(f"I need to find the {anchor.lower()} first.", f"RetrieveNode[{s}]")
        p.act("And the anatomy.", f"RetrieveNode[{where}]")
        p.act(f"I list the diseases it {verb.split()[0]}.", f"NeighbourCheck[$0, {relation}]")
        p.act("I check where each disease is located.", f"NeighbourCheck[$2[*], {LOCALIZES}]")
        p.act("And read the disease names.", "NodeFeature[$2[*], name]")
        return Instance({slot: s, "anatomy": where},
                        ", ".join(_name(c, "Disease", d) for d in found), p.finish(),
                        {slot: c.id(anchor, i), "anatomy": c.id("Anatomy", a)})
    return build


_located_template("biomedical/8", "Compound", PALLIATES, "compound", "palliates")
_located_template("biomedical/9", "Compound", TREATS, "compound", "treats")
_located_template("biomedical/10", "Gene", GENE_DISEASE["down"], "gene", "downregulates")
_located_template("biomedical/11", "Gene", GENE_DISEASE["assoc"], "gene", "is associated with")
_located_template("biomedical/12", "Gene", GENE_DISEASE["up"], "gene", "upregulates")


@T.add("biomedical/13", "medium", "Gene", False)
def gene_symptom_link(c: Ctx, i: int) -> Instance:
    diseases = set(map(int, c.nb("Gene", GENE_DISEASE["assoc"], i)))
    if not diseases:
        raise Reject("gene has no disease")
    if c.rng.random() < 0.5:
        symptoms = [int(s) for d in sorted(diseases) for s in c.nb("Disease", PRESENTS, d)]
        if not symptoms:
            raise Reject("no symptom")
        s = c.pick(symptoms)
    else:
        s = int(c.rng.integers(0, c.g.counts["Symptom"]))
    linked = any(int(d) in diseases for d in c.nb("Symptom", PRESENTS, s))
    gene, sid = c.surface("Gene", i, paraphrase=False), c.id("Symptom", s)
    p = PlanBuilder()
    p.step(f"the diseases associated with {gene}",
           f"gene = RetrieveNode({q(gene)})\n"
           f"print(\", \".join(NodeFeature(d, \"name\") for d in NeighbourCheck(gene, {q(GENE_DISEASE['assoc'])})))")
    p.step(f"whether a disease associated with {gene} presents the symptom {sid}",
           f"gene = RetrieveNode({q(gene)})\n"
           f"diseases = NeighbourCheck(gene, {q(GENE_DISEASE['assoc'])})\n"
           f"linked = any(d in diseases for d in NeighbourCheck({q(sid)}, {q(PRESENTS)}))\n"
           f"print(\"True\" if linked else \"False\")")
    p.act("I need to find the gene first.", f"RetrieveNode[{gene}]")
    p.act("I list the diseases associated with it.", f"NeighbourCheck[$0, {GENE_DISEASE['assoc']}]")
    p.act("And the diseases presenting the symptom.", f"NeighbourCheck[{sid}, {PRESENTS}]")
    return Instance({"gene": gene, "symptom_id": sid}, "True" if linked else "False", p.finish(),
                    {"gene": c.id("Gene", i), "symptom_id": sid})


def _symptom_diseases_step(p: PlanBuilder, s: str) -> None:
    p.step(f"the diseases that present {s}",
           f"symptom = RetrieveNode({q(s)})\n"
           f"print(\", \".join(NodeFeature(d, \"name\") for d in NeighbourCheck(symptom, {q(PRESENTS)})))")


def _unique_best(counts: Counter) -> int:
    ranked = counts.most_common(2)
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        raise Reject("no unique best")
    return ranked[0][0]


def _mode_through_diseases(c: Ctx, i: int, via: str, middle_type: str, relation: str) -> int:
    """The most frequent `relation` neighbour of the distinct `via` neighbours of the diseases
    presenting symptom i (a tie rejects the instance)."""
    middle: list[int] = []
    for d in c.nb("Symptom", PRESENTS, i):
        for x in c.nb("Disease", via, d):
            if int(x) not in middle:
                middle.append(int(x))
    counts: Counter = Counter()
    for x in middle:
        counts.update(int(k) for k in c.nb(middle_type, relation, x))
    return _unique_best(counts)


def _class_template(template: str, relation: str, verb: str):
    @T.add(template, "medium", "Symptom", False)
    def build(c: Ctx, i: int) -> Instance:
        best = _mode_through_diseases(c, i, relation, "Compound", INCLUDES)
        s = c.surface("Symptom", i)
        p = PlanBuilder()
        _symptom_diseases_step(p, s)
        p.step(f"the pharmacologic class with the most compounds that {verb} a disease presenting {s}",
               f"symptom = RetrieveNode({q(s)})\n"
               f"compounds = []\n"
               f"for disease in NeighbourCheck(symptom, {q(PRESENTS)}):\n"
               f"    for compound in NeighbourCheck(disease, {q(relation)}):\n"
               f"        if compound not in compounds:\n"
               f"            compounds.append(compound)\n"
               f"counts = {{}}\n"
               f"for compound in compounds:\n"
               f"    for group in NeighbourCheck(compound, {q(INCLUDES)}):\n"
               f"        counts[group] = counts.get(group, 0) + 1\n"
               f"print(NodeFeature(max(counts, key=counts.get), \"name\"))")
        p.act("I need to find the symptom first.", f"RetrieveNode[{s}]")
        p.act("I list the diseases presenting it.", f"NeighbourCheck[$0, {PRESENTS}]")
        p.act(f"And the compounds that {verb} each disease.", f"NeighbourCheck[$1[*], {relation}]")
        p.act("I look up the pharmacologic classes of those compounds.", f"NeighbourCheck[$2[*], {INCLUDES}]")
        p.act("And read the class names.", "NodeFeature[$3[*], name]")
        return Instance({"symptom": s}, _name(c, "Pharmacologic_Class", best), p.finish(),
                        {"symptom": c.id("Symptom", i)})
    return build


_class_template("biomedical/17", PALLIATES, "palliate")
_class_template("biomedical/18", TREATS, "treat")


def _gene_mode_template(template: str, link: str, relation: str, target: str, what: str, verb: str):
    @T.add(template, "medium", "Symptom", False)
    def build(c: Ctx, i: int) -> Instance:
        best = _mode_through_diseases(c, i, link, "Gene", relation)
        s = c.surface("Symptom", i)
        p = PlanBuilder()
        _symptom_diseases_step(p, s)
        p.step(f"the {what} that most genes {verb} in diseases presenting {s} participate in",
               f"symptom = RetrieveNode({q(s)})\n"
               f"genes = []\n"
               f"for disease in NeighbourCheck(symptom, {q(PRESENTS)}):\n"
               f"    for gene in NeighbourCheck(disease, {q(link)}):\n"
               f"        if gene not in genes:\n"
               f"            genes.append(gene)\n"
               f"counts = {{}}\n"
               f"for gene in genes:\n"
               f"    for part in NeighbourCheck(gene, {q(relation)}):\n"
               f"        counts[part] = counts.get(part, 0) + 1\n"
               f"print(NodeFeature(max(counts, key=counts.get), \"name\"))")
        p.act("I need to find the symptom first.", f"RetrieveNode[{s}]")
        p.act("I list the diseases presenting it.", f"NeighbourCheck[$0, {PRESENTS}]")
        p.act(f"And the genes {verb} in each disease.", f"NeighbourCheck[$1[*], {link}]")
        p.act(f"I look up the {what} of each gene.", f"NeighbourCheck[$2[*], {relation}]")
        p.act("And read their names.", "NodeFeature[$3[*], name]")
        return Instance({"symptom": s}, _name(c, target, best), p.finish(),
                        {"symptom": c.id("Symptom", i)})
    return build


_CC, _PW = "Gene-participates-Cellular Component", "Gene-participates-Pathway"
_gene_mode_template("biomedical/19", GENE_DISEASE["up"], _CC, "Cellular_Component", "cellular component", "upregulated")
_gene_mode_template("biomedical/20", GENE_DISEASE["assoc"], _CC, "Cellular_Component", "cellular component", "associated")
_gene_mode_template("biomedical/21", GENE_DISEASE["down"], _CC, "Cellular_Component", "cellular component", "downregulated")
_gene_mode_template("biomedical/22", GENE_DISEASE["up"], _PW, "Pathway", "pathway", "upregulated")
_gene_mode_template("biomedical/23", GENE_DISEASE["assoc"], _PW, "Pathway", "pathway", "associated")
_gene_mode_template("biomedical/24", GENE_DISEASE["down"], _PW, "Pathway", "pathway", "downregulated")


def _identical_template(template: str, anchor: str, relation: str, other_type: str, what: str):
    """How many other nodes of the anchor's type have exactly the same neighbour set."""
    @T.add(template, "medium", anchor, False)
    def build(c: Ctx, i: int) -> Instance:
        mine = [int(x) for x in c.nb(anchor, relation, i)]
        if not mine:
            raise Reject("no neighbours")
        target = set(mine)
        same: set[int] = set()
        for x in mine:
            for o in c.nb(other_type, relation, x):
                if int(o) != i and set(map(int, c.nb(anchor, relation, o))) == target:
                    same.add(int(o))
        if not same and c.rng.random() > 0.2:
            raise Reject("prefer non-zero counts")
        s = c.surface(anchor, i, paraphrase=False)
        p = PlanBuilder()
        p.step(f"the {what} of {s}",
               f"node = RetrieveNode({q(s)})\n"
               f"print(\", \".join(NodeFeature(x, \"name\") for x in NeighbourCheck(node, {q(relation)})))")
        p.step(f"how many other {anchor.lower()}s have exactly the same {what} as {s}",
               f"node = RetrieveNode({q(s)})\n"
               f"mine = set(NeighbourCheck(node, {q(relation)}))\n"
               f"same = set()\n"
               f"for x in mine:\n"
               f"    for other in NeighbourCheck(x, {q(relation)}):\n"
               f"        if other != node and set(NeighbourCheck(other, {q(relation)})) == mine:\n"
               f"            same.add(other)\n"
               f"print(len(same))")
        p.act(f"I need to find the {anchor.lower()} first.", f"RetrieveNode[{s}]")
        p.act(f"I list its {what}.", f"NeighbourCheck[$0, {relation}]")
        p.act(f"And the other {anchor.lower()}s linked to each of them.", f"NeighbourCheck[$1[*], {relation}]")
        p.act(f"I list their {what} to compare.", f"NeighbourCheck[$2[*], {relation}]")
        return Instance({"name": s}, str(len(same)), p.finish(), {"name": c.id(anchor, i)})
    return build


_identical_template("biomedical/25", "Gene", "Gene-participates-Biological Process",
                    "Biological_Process", "biological processes")
_identical_template("biomedical/26", "Disease", PRESENTS, "Symptom", "symptoms")
