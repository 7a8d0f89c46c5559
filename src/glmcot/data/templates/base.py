"""Template machinery: sampling instances, gold answers from the graph arrays, gold plans.

A template is a function `(ctx, anchor) -> Instance` registered with its GRBench id
(`dblp/0`), level and anchor node type. It computes the gold answer straight from the
SynthGraph arrays (never through glmcot.graph) and writes the plans as text; it raises `Reject`
when the anchor does not give a well-posed question (empty answer, a tie, a neighbour list the
primitives would cut). Question wordings live in resources/templates/<domain>.json.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from importlib import resources

import numpy as np

from glmcot.data.questions import GLMStep, GraphCoTAction, Plan, QuestionRecord
from glmcot.data.synth.core import SynthGraph

# NeighbourCheck's default bound in glmcot.graph: a plan may only read lists up to this length.
NEIGHBOUR_LIMIT = 50


class Reject(Exception):
    """This anchor does not make a well-posed instance of the template."""


def q(text: str) -> str:
    """A Python string literal for plan code."""
    return json.dumps(text, ensure_ascii=False)


def fmt(value) -> str:
    """Answer text of a feature value, as GRBench writes it (lists joined by ', ')."""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def unique_top(counter: Counter, k: int = 1) -> list:
    """The k most common keys, or Reject when the top-k set is not unique."""
    ranked = sorted(counter.items(), key=lambda kv: -kv[1])
    if len(ranked) < k:
        raise Reject("too few values")
    if len(ranked) > k and ranked[k - 1][1] == ranked[k][1]:
        raise Reject("tie")
    return [key for key, _ in ranked[:k]]


@dataclass
class PlanBuilder:
    glm: list[GLMStep] = field(default_factory=list)
    graphcot: list[GraphCoTAction] = field(default_factory=list)

    def step(self, missing: str, code: str) -> PlanBuilder:
        self.glm.append(GLMStep(missing, code.strip("\n")))
        return self

    def act(self, thought: str, action: str) -> int:
        self.graphcot.append(GraphCoTAction(thought, action))
        return len(self.graphcot) - 1

    def finish(self) -> Plan:
        self.act("I have everything I need to answer.", "Finish[$answer]")
        return Plan(self.glm, self.graphcot)


@dataclass
class Instance:
    params: dict
    answer: str
    plan: Plan
    entities: dict


class Ctx:
    """What a template sees: the graph arrays, a seeded generator, helpers that check bounds."""

    def __init__(self, graph: SynthGraph, rng: np.random.Generator, paraphrase_rate: float = 0.15):
        self.g = graph
        self.rng = rng
        self.paraphrase_rate = paraphrase_rate

    # gold-side reads -------------------------------------------------------------------------
    def nb(self, node_type: str, relation: str, i: int, limit: bool = True) -> np.ndarray:
        """Neighbours (local indices); Reject when a plan would read a list the primitives cut."""
        out = self.g.neighbors(node_type, relation, int(i))
        if limit and len(out) > NEIGHBOUR_LIMIT:
            raise Reject("neighbour list over the primitive's bound")
        return out

    def deg(self, node_type: str, relation: str, i: int) -> int:
        indptr, _ = self.g.csr(node_type, relation)
        return int(indptr[int(i) + 1] - indptr[int(i)])

    def f(self, node_type: str, name: str, i: int):
        return self.g.features[node_type][name][int(i)]

    def target(self, node_type: str, relation: str) -> str:
        return self.g.schema.relation_target(node_type, relation)

    def id(self, node_type: str, i: int) -> str:
        return self.g.ids[node_type][int(i)]

    def surface(self, node_type: str, i: int, paraphrase: bool = True, max_chars: int = 0) -> str:
        """How a question mentions a node: its text, sometimes lightly paraphrased or cut."""
        text = self.g.text(node_type, int(i))
        if not isinstance(text, str) or not text.strip():
            raise Reject("node has no text")
        if max_chars and len(text) > max_chars:
            cut = text[:max_chars]
            text = cut[: cut.rfind(" ")] if " " in cut else cut
        elif paraphrase and self.rng.random() < self.paraphrase_rate:
            text = paraphrase_text(text, self.rng)
        return text

    def pick(self, options):
        return options[int(self.rng.integers(0, len(options)))]


def paraphrase_text(text: str, rng: np.random.Generator) -> str:
    """A light rewording an LLM-paraphrased question would carry: drop a subtitle or series tag,
    change case, or drop a leading article."""
    choice = rng.random()
    for sep in (" (", ": "):
        head = text.split(sep)[0]
        if sep in text and len(head.split()) >= 3 and choice < 0.5:
            return head
    if choice < 0.75:
        return text.lower()
    for article in ("The ", "A ", "An "):
        if text.startswith(article) and len(text.split()) > 3:
            return text[len(article):]
    return text.lower()


@dataclass
class Template:
    template: str
    level: str
    anchor: str                       # node type the instance is drawn from
    deterministic: bool
    build: Callable[[Ctx, int], Instance]


class TemplateSet:
    def __init__(self, domain: str):
        self.domain = domain
        self.templates: list[Template] = []

    def add(self, template: str, level: str, anchor: str, deterministic: bool):
        def register(fn: Callable[[Ctx, int], Instance]):
            self.templates.append(Template(template, level, anchor, deterministic, fn))
            return fn
        return register


@lru_cache(maxsize=None)
def wordings(domain: str) -> dict[str, list[str]]:
    path = resources.files("glmcot.data").joinpath("resources", "templates", f"{domain}.json")
    return json.loads(path.read_text(encoding="utf-8"))


def fill(wording: str, params: dict) -> str:
    out = wording
    for key, value in params.items():
        out = out.replace("{" + key + "}", str(value))
    left = re.findall(r"\{[a-z_0-9]+\}", wording)
    unfilled = [slot for slot in left if slot[1:-1] not in params]
    if unfilled:
        raise KeyError(f"wording {wording!r} needs slots {unfilled} the template does not fill")
    return out


class Wordings(str, Enum):
    """Which of a template's wordings questions are phrased with. The last wording of every
    template is the held-out one, so a model trained on `seen` can be tested on phrasings it never
    read."""

    ALL = "all"
    SEEN = "seen"
    HELD_OUT = "held-out"


def wording_choices(phrasings: list[str], which: Wordings) -> list[str]:
    if which == Wordings.ALL or len(phrasings) < 2:
        return phrasings
    return phrasings[:-1] if which == Wordings.SEEN else phrasings[-1:]


def is_held_out_wording(domain: str, template: str, params: dict, question: str) -> bool:
    """Whether a question is phrased with its template's held-out (last) wording."""
    phrasings = wordings(domain).get(template) or []
    return len(phrasings) >= 2 and fill(phrasings[-1], params) == question


def sample_template(template: Template, ctx: Ctx, domain: str, count: int,
                    max_tries: int = 400, which: Wordings = Wordings.ALL) -> list[tuple[Template, Instance, str]]:
    """Up to `count` instances of one template, each anchored on a distinct random node."""
    n = ctx.g.counts[template.anchor]
    phrasings = wordings(domain).get(template.template)
    if not phrasings:
        raise KeyError(f"no wordings for template {template.template}")
    phrasings = wording_choices(phrasings, Wordings(which))
    order = ctx.rng.permutation(n)[: max(count * max_tries // 10, 50)]
    out: list[tuple[Template, Instance, str]] = []
    seen_answers: set[tuple] = set()
    for tries, anchor in enumerate(order):
        if len(out) >= count or tries >= count * max_tries:
            break
        try:
            inst = template.build(ctx, int(anchor))
        except Reject:
            continue
        key = tuple(sorted(inst.entities.items()))
        if key in seen_answers:
            continue
        seen_answers.add(key)
        wording = phrasings[int(ctx.rng.integers(0, len(phrasings)))]
        out.append((template, inst, fill(wording, inst.params)))
    return out


def to_records(domain: str, sampled: Iterable[tuple[Template, Instance, str]], start: int = 0
               ) -> list[QuestionRecord]:
    records = []
    for k, (template, inst, question) in enumerate(sampled, start):
        records.append(QuestionRecord(
            qid=f"{domain}-{k:05d}", domain=domain, template=template.template,
            params=inst.params, level=template.level, question=question, answer=inst.answer,
            deterministic=template.deterministic, plan=inst.plan, entities=inst.entities))
    return records
