"""Constrained decoding for the agents (beyond the paper): each agent's reply is decoded under a
grammar of what it may say.

- C-Agent: the label, `<label>deterministic</label>` or `<label>non-deterministic</label>` (with the
  classify-and-plan prompt, an optional `<missing>...</missing>` after it).
- R-Agent: `<answer>...</answer>` or `<missing>...</missing>`.
- A-Agent: `<code>\\n...\\n</code>` holding the Python subset the sandbox accepts (its statements,
  expressions, builtins and methods: `agents.sandbox.policy`), with the primitives' string
  arguments restricted to the graph's own relation and feature names, and node-id arguments to
  names (ids the snippet produced), calls, or the ids the prompt shows. Optionally (`question_spans`)
  RetrieveNode's text must be a span of words of the question the prompt holds.
- Graph-CoT's action line (method `graphcot-repaired` only): one bracket action with a schema
  relation or feature and, when the scratchpad shows ids, one of them. The faithful `graphcot`
  never runs under a grammar: its requests name their method (`metadata["method"]`), and
  `GrammarBackend` leaves that method's calls alone, so its figures stay comparable with the original.

The schema part of each grammar is built once per graph vocabulary and cached; the engine compiles
each distinct grammar text once. Grammars over-approximate what the sandbox takes (it still checks
every snippet): they exclude what cannot run, misnamed relations and features first.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace

from glmcot.agents.sandbox.policy import BUILTINS, METHODS
from glmcot.llm.types import Choices, Grammar, LLMBackend, LLMRequest, LLMResponse

MAX_DEPTH = 6  # nested blocks (for/while/if) a snippet may open
FAITHFUL_METHOD = "graphcot"  # the faithful Graph-CoT: never constrained


@dataclass(frozen=True)
class GraphVocabulary:
    """The names a graph's schema gives the primitives' string arguments."""

    relations: tuple[str, ...]
    features: tuple[str, ...]

    @classmethod
    def of(cls, graph) -> GraphVocabulary:
        """From a graph store (node_types / relation_names / feature_names)."""
        relations: set[str] = set()
        features: set[str] = set()
        types = graph.node_types
        for node_type in (types() if callable(types) else types):
            relations.update(graph.relation_names(node_type))
            features.update(graph.feature_names(node_type))
        if not relations and not features:
            raise ValueError("the graph's schema names no relation and no feature")
        return cls(tuple(sorted(relations)), tuple(sorted(features)))


@dataclass(frozen=True)
class GrammarSettings:
    """Which agents decode under a grammar, and whether RetrieveNode's text is restricted to spans
    of the question (off by default: a large model may rightly normalise a name)."""

    classify: bool = True
    reason: bool = True
    act: bool = True
    graphcot: bool = True   # graphcot-repaired's action line (never the faithful graphcot)
    question_spans: bool = False
    max_span_words: int = 16


def literal(text: str) -> str:
    """An EBNF string literal matching `text` exactly."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def _choice(items) -> str:
    return " | ".join(literal(item) for item in items)


def _quoted(names: tuple[str, ...]) -> str:
    """A Python string literal (either quote) holding one of `names`."""
    inner = _choice(names)
    return f'("\\"" ({inner}) "\\"") | ("\'" ({inner}) "\'")'


CLASSIFY_EBNF = 'root ::= "<label>" ("deterministic" | "non-deterministic") "</label>"\n'
CLASSIFY_PLAN_EBNF = ('root ::= "<label>" ("deterministic" | "non-deterministic") "</label>" '
                      '([ \\n]* "<missing>" body "</missing>")?\n'
                      'body ::= ([^<] | "<" [^/])*\n')
# the text may hold "<" (legal opinions quote HTML) but not "</" before the closing tag
REASON_EBNF = ('root ::= ("<answer>" body "</answer>") | ("<missing>" body "</missing>")\n'
               'body ::= ([^<] | "<" [^/])*\n')


def _python_rules() -> str:
    """Statements and expressions of the sandbox's subset (indentation by depth, 4 spaces)."""
    rules = []
    for depth in range(MAX_DEPTH + 1):
        pad = literal("    " * depth) + " " if depth else ""
        rules.append(f"block{depth} ::= stmt{depth}+")
        if depth == MAX_DEPTH:
            rules.append(f'stmt{depth} ::= {pad}simple "\\n"')
            continue
        inner = f"block{depth + 1}"
        rules.append(f'stmt{depth} ::= {pad}simple "\\n" | {pad}"for " targets " in " expr ":\\n" {inner}'
                     f' | {pad}"while " expr ":\\n" {inner}'
                     f' | {pad}"if " expr ":\\n" {inner} ({pad}"elif " expr ":\\n" {inner})* ({pad}"else:\\n" {inner})?')
    methods = _choice(sorted(METHODS))
    builtins = _choice(sorted(BUILTINS, key=len, reverse=True))
    rules += [
        'simple ::= assign | augassign | "break" | "continue" | "pass" | expr',
        'assign ::= targets ws "=" ws expr',
        'augassign ::= target ws ("+=" | "-=" | "*=" | "/=" | "//=" | "%=") ws expr',
        'targets ::= target (ws "," ws target)*',
        'target ::= name ("[" ws expr ws "]")*',
        'expr ::= "lambda" (" " name (ws "," ws name)*)? ws ":" ws expr | ternary',
        'ternary ::= or_expr (" if " or_expr " else " expr)?',
        'or_expr ::= and_expr (" or " and_expr)*',
        'and_expr ::= not_expr (" and " not_expr)*',
        'not_expr ::= "not " not_expr | comparison',
        'comparison ::= bits (comp_op bits)*',
        'bits ::= arith (ws ("|" | "&" | "^") ws arith)*',
        'comp_op ::= ws ("==" | "!=" | "<=" | ">=" | "<" | ">") ws | " in " | " not in " | " is " | " is not "',
        'arith ::= term (ws ("+" | "-") ws term)*',
        'term ::= factor (ws ("*" | "//" | "/" | "%") ws factor)*',
        'factor ::= ("-" | "+") factor | power',
        'power ::= primary (ws "**" ws factor)?',
        'primary ::= atom trailer*',
        'trailer ::= "[" ws subscript ws "]" | "." method ("(" ws args? ws ")")?',
        'subscript ::= expr | expr? ws ":" ws expr? (ws ":" ws expr?)?',
        f"method ::= {methods}",
        'atom ::= primitive_call | builtin_call | name | number | string | fstring | "True" | "False" | "None"'
        ' | list | paren | braces',
        f'builtin_call ::= ({builtins}) "(" ws args? ws ")"',
        'args ::= arg (ws "," ws arg)* (ws ",")?',
        'arg ::= expr comp_for* | name ws "=" ws expr | "*" expr',
        'list ::= "[" ws (expr (ws "," ws expr)* (ws ",")?)? ws "]" | "[" ws expr comp_for+ ws "]"',
        'paren ::= "(" ws ")" | "(" ws expr ws ")" | "(" ws expr comp_for+ ws ")" | "(" ws expr ws "," (ws expr (ws "," ws expr)* (ws ",")?)? ws ")"',
        'braces ::= "{" ws "}" | "{" ws pair (ws "," ws pair)* (ws ",")? ws "}" | "{" ws pair comp_for+ ws "}"'
        ' | "{" ws expr (ws "," ws expr)* (ws ",")? ws "}" | "{" ws expr comp_for+ ws "}"',
        'pair ::= expr ws ":" ws expr',
        'comp_for ::= " for " targets " in " or_expr (" if " or_expr)*',
        'name ::= [a-zA-Z] [a-zA-Z0-9_]*',
        'number ::= [0-9]+ ("." [0-9]+)?',
        'string ::= "\\"" ([^"\\\\\\n] | "\\\\" [^\\n])* "\\"" | "\'" ([^\'\\\\\\n] | "\\\\" [^\\n])* "\'"',
        'fstring ::= "f\\"" ([^"\\\\\\n{}] | "{{" | "}}" | "\\\\" [^\\n] | "{" ws expr ws fformat? "}")* "\\""'
        ' | "f\'" ([^\'\\\\\\n{}] | "{{" | "}}" | "\\\\" [^\\n] | "{" ws expr ws fformat? "}")* "\'"',
        'fformat ::= ("!" [rsa])? (":" [^}"\'\\n]*)?',
        'ws ::= [ ]*',
        'node_expr ::= (name | primitive_call | builtin_call | paren) trailer*',
    ]
    return "\n".join(rules) + "\n"


@functools.lru_cache(maxsize=32)
def _act_base(vocabulary: GraphVocabulary) -> str:
    """The A-Agent grammar of one graph vocabulary, without the per-request parts (cached)."""
    relation = _quoted(vocabulary.relations) if vocabulary.relations else '"\\"\\""'
    feature = _quoted(vocabulary.features) if vocabulary.features else '"\\"\\""'
    return (
        'root ::= "<code>\\n" block0 "</code>"\n'
        + _python_rules()
        + 'primitive_call ::= "RetrieveNode(" ws text_arg ws ")" | "NodeInfo(" ws node_arg ws ")"'
        ' | "NodeFeature(" ws node_arg ws "," ws feature_arg ws ")"'
        ' | "NeighbourCheck(" ws node_arg ws "," ws relation_arg ws ")"'
        ' | "NodeDegree(" ws node_arg ws "," ws relation_arg ws ")"\n'
        f"relation_arg ::= {relation}\n"
        f"feature_arg ::= {feature}\n"
    )


_IDS = re.compile(r"<([0-9a-f]{24})>|\[node ([^\s|\]]+) \|")
_QUOTED = re.compile(r'"([^"\n]{2,200})"')


def prompt_ids(prompt: str, limit: int = 64) -> tuple[str, ...]:
    """The node ids a prompt shows (notebook records and neighbour lists), first seen first."""
    seen: dict[str, None] = {}
    for match in _IDS.finditer(prompt):
        seen.setdefault(match.group(1) or match.group(2), None)
        if len(seen) >= limit:
            break
    return tuple(seen)


# Words a name hardly starts or ends with: spans with one at an edge are left out, so a small
# model cannot settle for "the authors of". A capitalised article may start a title ("The Quiet
# Harbour") unless it opens the question.
_EDGE_WORDS = frozenset("""a an the of in on at by for to from with and or is are was were be do does did who whom whose what
which when where how many much me my you your can could please tell inform list name give show that this these those
there their its it as has have had any all some""".split())


def _edge_ok(word: str, first_of_question: bool) -> bool:
    bare = word.strip("\"'“”,;:()?.!")
    if not bare:
        return False
    if bare.lower() not in _EDGE_WORDS:
        return True
    return bare[0].isupper() and bare.lower() in ("a", "an", "the") and not first_of_question


def question_spans(question: str, max_words: int = 16) -> tuple[str, ...]:
    """Word spans of the question (up to `max_words` words, not starting or ending with a
    function word) that RetrieveNode's text may be; each quoted passage is also a span, so a
    title in quotes is always reachable whole."""
    words = question.strip().rstrip("?.!").split()
    spans: dict[str, None] = {}
    for match in _QUOTED.finditer(question):
        spans.setdefault(match.group(1), None)
    for start in range(len(words)):
        if not _edge_ok(words[start], start == 0):
            continue
        for end in range(start + 1, min(len(words), start + max_words) + 1):
            if not _edge_ok(words[end - 1], end - 1 == 0) and not (end - 1 == start and words[start][:1].isupper()):
                continue
            span = " ".join(words[start:end]).strip("\"'“”,;:()")
            if len(span) >= 2 and '"' not in span and "\\" not in span:
                spans.setdefault(span, None)
    return tuple(spans)


def act_grammar(vocabulary: GraphVocabulary, ids: tuple[str, ...] = (), spans: tuple[str, ...] | None = None) -> Grammar:
    """The A-Agent's grammar: the vocabulary's cached rules plus the ids the prompt shows. With
    `spans`, RetrieveNode's text is a double-quoted literal that must be one of them (applied as
    `Choices` over the same compiled grammar)."""
    node = "node_arg ::= node_expr" + (f" | {_quoted(ids)}" if ids else "") + "\n"
    if spans:
        text = 'text_arg ::= "\\"" [^"\\\\\\n]+ "\\""\n'
        return Grammar(_act_base(vocabulary) + node + text, "act (question spans)", Choices('RetrieveNode("', '"', spans))
    return Grammar(_act_base(vocabulary) + node + "text_arg ::= string | fstring | node_expr\n", "act")


def graphcot_action_grammar(vocabulary: GraphVocabulary, ids: tuple[str, ...] = ()) -> Grammar:
    """One Graph-CoT action (graphcot-repaired): RetrieveNode[text], NeighbourCheck[id, relation],
    NodeFeature[id, feature], NodeDegree[id, relation] or Finish[answer]."""
    node = _choice(ids) if ids else '[^,\\]\\n]+'
    relation = _choice(vocabulary.relations) if vocabulary.relations else '[^\\]\\n]+'
    feature = _choice(vocabulary.features) if vocabulary.features else '[^\\]\\n]+'
    return Grammar(
        'root ::= " "? (retrieve | neighbours | feature | degree | finish)\n'
        'retrieve ::= "RetrieveNode[" [^\\]\\n]+ "]"\n'
        f'neighbours ::= "NeighbourCheck[" node ", " relation "]"\n'
        f'feature ::= "NodeFeature[" node ", " featurename "]"\n'
        f'degree ::= "NodeDegree[" node ", " relation "]"\n'
        'finish ::= "Finish[" [^\\n]* "]"\n'
        f"node ::= {node}\nrelation ::= {relation}\nfeaturename ::= {feature}\n",
        "graphcot-action")


_NEEDED = re.compile(r"(?:Needed|Question): (.*)")


def request_grammar(request: LLMRequest, vocabulary: GraphVocabulary, settings: GrammarSettings) -> Grammar | None:
    """The grammar for one agent call (None: decoded freely)."""
    agent = str(request.metadata.get("agent", ""))
    if request.metadata.get("method") == FAITHFUL_METHOD:
        return None  # the faithful Graph-CoT: never constrained
    if agent == "classify" and settings.classify:
        plan = any(stop == "</missing>" for stop in request.stop)
        return Grammar(CLASSIFY_PLAN_EBNF if plan else CLASSIFY_EBNF, "classify")
    if agent == "reason" and settings.reason:
        return Grammar(REASON_EBNF, "reason")
    prompt = request.prompt
    if agent == "act" and settings.act:
        spans = None
        if settings.question_spans:
            asked = _NEEDED.findall(prompt)
            spans = question_spans(" ".join(asked), settings.max_span_words) if asked else None
        return act_grammar(vocabulary, prompt_ids(prompt), spans or None)
    if agent == "graphcot-action" and settings.graphcot:
        return graphcot_action_grammar(vocabulary, prompt_ids(prompt))
    return None


class GrammarBackend(LLMBackend):
    """Wraps a backend: each agent call goes out with its grammar (`request_grammar`)."""

    def __init__(self, inner: LLMBackend, vocabulary: GraphVocabulary, settings: GrammarSettings | None = None):
        self.inner = inner
        self.vocabulary = vocabulary
        self.settings = settings or GrammarSettings()
        self.label = f"{inner.label} (constrained decoding)"

    def complete(self, request: LLMRequest) -> LLMResponse:
        if request.forced_text is None and request.grammar is None:
            grammar = request_grammar(request, self.vocabulary, self.settings)
            if grammar is not None:
                request = replace(request, grammar=grammar)
        return self.inner.complete(request)

    def end_session(self, session_id: str) -> None:
        self.inner.end_session(session_id)

    def close(self) -> None:
        self.inner.close()
