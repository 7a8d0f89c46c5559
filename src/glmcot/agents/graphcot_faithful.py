"""The Graph-CoT baseline as the original runs it (method ``graphcot``; grbench.md §3 and §10).

The one to compare with published Graph-CoT numbers. Kept from the original: the prompt's
structure (a system line, the four functions, worked traces each after the graph definition with
bare-value observations, the question suffix, the scratchpad), two LLM calls per step over the
whole prompt, stop at newline, 300 output tokens, the output's newlines removed, the raw action
line, actions split as ``\\w+\\[.*?\\]`` unless the line starts with ``Finish``, each action read as
``^(\\w+)\\[(.+)\\]$``, two-argument tools split on ``", "`` with quotes removed only when both ends
have one, the runtime sentences word for word (prompts/graphcot_original.yaml), Finish wherever it
appears in the action list, the Finish argument evaluated as a Python expression (without
running code: literals and arithmetic only, see ``finish_value``), a halted question answering
``''``, and the halt rule: more than ``graphcot_max_steps`` steps, or a human message over
``graphcot_token_cap`` tokens counted with p50k (tiktoken's ``text-davinci-003`` encoding) when
that encoding is on this machine, else with the Qwen tokenizer (the trace names which).

The repaired baseline (``graphcot-repaired``, agents/graphcot.py) is stronger than this one.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from glmcot.agents.base import AsyncAnswer, QuestionFailed, QuestionRun
from glmcot.graph.graph_source import SourceUnavailable
from glmcot.agents.config import AgentConfig
from glmcot.agents.context import AgentContext
from glmcot.agents.records import QuestionResult
from glmcot.graph.tools.graphcot import GraphFunctions
from glmcot.agents.retrieval import TimedResolver
from glmcot.agents.trace import GraphCoTConfig, GraphCoTStep
from glmcot.llm import Level, LLMBackend, LLMError, Segment
from glmcot.agents import formats
from glmcot.llm.tokens import TokenCounter, qwen_counter

METHOD = "graphcot"
_WORD = re.compile(r"\w+")
_MAX_FINISH_EVAL_CHARS = 10_000  # longer Finish arguments are taken as text (no parse at all)


# ---- prompt ---------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def original_prompt_data() -> dict:
    text = resources.files("glmcot.agents").joinpath("prompts", "graphcot_original.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def sentences() -> dict[str, str]:
    return dict(original_prompt_data()["sentences"])


_VALUE_SENTENCE = re.compile(r"The \S+ (?:feature|neighbors|neighbor node degree) of \S+ are: (.*?)\.(?=\s+The \S+ |\s*$)")
_RETRIEVED = re.compile(r"The ID of this retrieval target node is (.*?)\.\s*$")


def bare_observations(examples: str) -> str:
    """The worked traces with the original's example observations: bare values, not sentences."""
    lines = []
    for line in examples.split("\n"):
        match = re.match(r"(Observation \d+: )(.*)$", line)
        if match:
            body = match.group(2)
            retrieved = _RETRIEVED.match(body)
            if retrieved:
                body = f"The ID of this node is {retrieved.group(1)}."
            else:
                values = _VALUE_SENTENCE.findall(body)
                if values:
                    body = ", ".join(values)
            line = match.group(1) + body
        lines.append(line)
    return "\n".join(lines)


PROMPT_AGENT = "graphcot-original"  # traces name the shared prompt "graphcot-original/<domain>@<hash>"


@dataclass(frozen=True)
class FaithfulPrompt:
    """The rendered prompt of one domain: ``system``, the human message's fixed ``head`` (up to
    the question) and its ``tail`` template (question and scratchpad). ``shared`` is the text
    every call starts with (the system line, then the head: requests have no system role)."""

    system: str
    head: str
    tail: str
    name: str

    @property
    def shared(self) -> str:
        return f"{self.system}\n\n{self.head}"

    def human(self, question: str, scratchpad: str) -> str:
        return self.head + self.tail.replace("{question}", question).replace("{scratchpad}", scratchpad)


def faithful_prompt(definition: str, traces: list[str], zero_shot: bool = False,
                    domain: str | None = None) -> FaithfulPrompt:
    data = original_prompt_data()
    template = data["zero_shot_template" if zero_shot else "template"]
    examples = "\n".join(f"Definition of the graph: {definition}\n{bare_observations(trace)}" for trace in traces)
    split = template.index("Question: {question}")
    head = template[:split].replace("{examples}", examples).replace("{graph}", definition)
    tail = template[split:]
    digest = hashlib.sha256(f"{data['system']}\n\n{head}".encode("utf-8")).hexdigest()[:12]
    return FaithfulPrompt(system=data["system"], head=head, tail=tail, name=f"{PROMPT_AGENT}/{domain or 'default'}@{digest}")


def domain_prompt(prompts, zero_shot: bool = False) -> FaithfulPrompt:
    """The faithful prompt of a PromptSet's domain (its definition, glmcot's worked traces)."""
    from glmcot.agents.prompts import graphcot_traces

    return faithful_prompt(prompts.definition, graphcot_traces(prompts.domain), zero_shot, prompts.domain)


# ---- token cap --------------------------------------------------------------------------------------
_P50K_URL = "https://openaipublic.blob.core.windows.net/encodings/p50k_base.tiktoken"


class _TiktokenCounter:
    name = "p50k_base"

    def __init__(self, encoding):
        self._encoding = encoding

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))


def cap_counter() -> tuple[TokenCounter, str]:
    """The original's cap tokenizer (p50k) if its file is cached on this machine (no download at
    run time), else the Qwen tokenizer; returns (counter, name)."""
    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or str(
        Path(tempfile.gettempdir()) / "data-gym-cache")
    if (Path(cache) / hashlib.sha1(_P50K_URL.encode()).hexdigest()).is_file():
        try:
            import tiktoken

            return _TiktokenCounter(tiktoken.get_encoding("p50k_base")), "p50k_base"
        except Exception:  # an unreadable cache: fall back, and the trace says so
            pass
    return qwen_counter(), "qwen (p50k_base not on this machine)"


# ---- action text --------------------------------------------------------------------------------
def split_checks(text: str) -> list[str]:
    """Every ``\\w+\\[.*?\\]`` match left to right, as ``re.findall`` gives them, in linear time."""
    found = []
    position, size = 0, len(text)
    while position < size:
        word = _WORD.search(text, position)
        if word is None:
            break
        end = word.end()
        if end < size and text[end] == "[":
            close = text.find("]", end + 1)
            newline = text.find("\n", end + 1)
            if close == -1:
                break  # no "]" later: nothing further can match
            if newline == -1 or close < newline:
                found.append(text[word.start() : close + 1])
                position = close + 1
                continue
        position = end if end > word.start() else word.start() + 1
    return found


def action_list(action: str) -> list[str]:
    return [action] if action[: len("Finish")] == "Finish" else split_checks(action)


def parse_action(text: str) -> tuple[str, str] | None:
    """``^(\\w+)\\[(.+)\\]$`` without a regular expression's backtracking: (name, argument) or None."""
    word = _WORD.match(text)
    if word is None or "\n" in text:
        return None
    name = word.group()
    rest = text[len(name) :]
    if len(rest) < 3 or rest[0] != "[" or rest[-1] != "]":
        return None
    return name, rest[1:-1]


def remove_quotes(text: str) -> str:
    if text.startswith(("'", '"')) and text.endswith(("'", '"')):
        return text[1:-1]
    return text


_ALLOWED_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


def _evaluate(node: ast.AST, depth: int = 0) -> Any:
    if depth > 50:
        raise ValueError("too deep")
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, depth + 1)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_evaluate(item, depth + 1) for item in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict):
        return {_evaluate(k, depth + 1): _evaluate(v, depth + 1) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
        value = _evaluate(node.operand, depth + 1)
        return {ast.USub: lambda v: -v, ast.UAdd: lambda v: +v, ast.Not: lambda v: not v}[type(node.op)](value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _ALLOWED_BINARY):
        left, right = _evaluate(node.left, depth + 1), _evaluate(node.right, depth + 1)
        numbers = all(isinstance(v, (int, float, complex)) and not isinstance(v, bool) for v in (left, right))
        if not numbers:
            if isinstance(node.op, ast.Add) and type(left) is type(right) and isinstance(left, (str, list, tuple)):
                return left + right
            raise ValueError("unsupported operands")
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 10**6):
            raise ValueError("power too large")
        operations = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
                      ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
                      ast.Pow: lambda a, b: a**b}
        return operations[type(node.op)](left, right)
    raise ValueError(f"not evaluated: {type(node).__name__}")


def finish_value(argument: str) -> Any:
    """The original's ``eval(argument)``, falling back to the raw text, without running code:
    literals and arithmetic evaluate as Python does (``1973-10-12`` is 1951, ``['a', 'b']`` a
    list); names, calls and anything else keep the text (where the original would have run it)."""
    if len(argument) > _MAX_FINISH_EVAL_CHARS:
        return argument
    try:
        return _evaluate(ast.parse(argument, mode="eval"))
    except Exception:  # SyntaxError, ZeroDivisionError, RecursionError, ...: the text, as the original
        return argument


def answer_text(value: Any) -> str:
    """The answer row's text: the value's ``str()`` (the original writes the value itself)."""
    return value if isinstance(value, str) else str(value)


# ---- observations ---------------------------------------------------------------------------------
class Observer:
    """One action's observation text, as GraphAgent.step builds it."""

    def __init__(self, functions: GraphFunctions, retrieve, text: dict[str, str]):
        self.functions = functions
        self.retrieve = retrieve
        self.text = text

    def observe(self, name: str, argument: str) -> str:
        text = self.text
        if name == "RetrieveNode":
            try:
                return _fill(text["retrieve"], node=str(self.retrieve(argument)))
            except Exception:  # the original turns any retrieval failure into this sentence
                return text["retrieve_failed"]
        kinds = {"NeighbourCheck": ("neighbours", self.functions.check_neighbours),
                 "NodeFeature": ("feature", self.functions.check_nodes),
                 "NodeDegree": ("degree", self.functions.check_degree)}
        if name not in kinds:
            return text["invalid_action"]
        kind, function = kinds[name]
        parts = argument.split(", ")
        if len(parts) != 2:
            return text[f"{kind}_arguments"]
        node_id, second = remove_quotes(parts[0]), remove_quotes(parts[1])
        try:
            value = function(node_id, second)
        except KeyError:
            return text[f"{kind}_missing"]
        except Exception:
            return text[f"{kind}_arguments"]
        return _fill(text[kind], name=second, node=node_id, value=value)


def _fill(template: str, **values: str) -> str:
    # one pass, so a value that contains "{node}" is not filled again
    return re.sub(r"\{(name|node|value)\}", lambda match: values[match.group(1)], template)


def format_step(text: str) -> str:
    """The original's output clean-up: strip, then drop newlines."""
    return text.strip("\n").strip().replace("\n", "")


# ---- the agent ------------------------------------------------------------------------------------
class FaithfulGraphCoTAgent(AsyncAnswer):
    method = METHOD

    def __init__(self, backend: LLMBackend, context: AgentContext, config: AgentConfig | None = None,
                 counter: TokenCounter | None = None):
        self.backend = backend
        self.context = context
        self.config = config or AgentConfig()
        prompts = context.prompts(self.config.domain, graphcot_examples=self.config.graphcot_examples)
        self.prompt = domain_prompt(prompts, zero_shot=not self.config.graphcot_examples)
        if counter is None:
            counter, counter_name = cap_counter()
        else:
            counter_name = getattr(counter, "name", type(counter).__name__)
        self.counter = counter
        self.counter_name = counter_name
        self.text = sentences()
        self._shared = self.prompt.shared
        self._names = {self._shared: self.prompt.name}

    def answer(self, question: str, qid: str | None = None) -> QuestionResult:
        run = QuestionRun(self.backend, question, qid, self.method, self._names, self.config.on_event)
        question = run.question  # made valid text (a lone surrogate cannot be tokenised or hashed)
        config = self.config
        run.trace.append(GraphCoTConfig("faithful", self.counter_name, config.graphcot_token_cap,
                                        config.graphcot_max_steps))
        retrieve = TimedResolver(self.context.retrieval.resolve)
        observer = Observer(GraphFunctions(self.context.graph), retrieve, self.text)
        head = Segment(self._shared, Level.SHARED_PROMPT)
        scratchpad = ""
        step = 1
        try:
            while True:
                if step > config.graphcot_max_steps:
                    raise QuestionFailed("step_limit", f"no Finish within {config.graphcot_max_steps} steps")
                human = self.prompt.human(question, scratchpad)
                if self.counter.count(human) > config.graphcot_token_cap:
                    raise QuestionFailed("step_limit", f"the prompt passed {config.graphcot_token_cap} tokens "
                                                       f"({self.counter_name}) at step {step}")
                scratchpad += f"\nThought {step}:"
                thought = self._call(run, "graphcot-thought", head, question, scratchpad, step)
                scratchpad += " " + thought
                scratchpad += f"\nAction {step}:"
                action = self._call(run, "graphcot-action", head, question, scratchpad, step)
                scratchpad += " " + action
                scratchpad += f"\nObservation {step}: "
                run.result.rounds = step
                observation = ""
                if action in ("", "\n"):
                    observation += self.text["empty_action"]
                finished = None
                for item in action_list(action):
                    parsed = parse_action(item)
                    if parsed is None:
                        observation += self.text["unparsed_action"]
                        continue
                    name, argument = parsed
                    if name == "Finish":
                        finished = finish_value(argument)
                        break
                    observation += observer.observe(name, argument)
                scratchpad += observation
                run.trace.append(GraphCoTStep(step, thought, action, observation if finished is None else None))
                if finished is not None:
                    run.result.retrieval_time_s = retrieve.seconds
                    return run.finish(answer_text(finished))
                step += 1
        except QuestionFailed as failure:
            run.result.retrieval_time_s = retrieve.seconds
            return run.finish("", failure)
        except LLMError as error:
            run.result.retrieval_time_s = retrieve.seconds
            return run.finish("", QuestionFailed("backend_error", str(error)))
        except SourceUnavailable as error:
            run.result.retrieval_time_s = retrieve.seconds
            return run.finish("", QuestionFailed("graph_source_error", str(error)))

    def _call(self, run: QuestionRun, agent: str, head: Segment, question: str, scratchpad: str, step: int) -> str:
        notebook = self.prompt.human(question, scratchpad)[len(self.prompt.head):]
        response = run.call(agent, [head, Segment(notebook, Level.NOTEBOOK)], max_tokens=self.config.graphcot_max_tokens,
                            stop=formats.GRAPHCOT_STOP, step=step - 1, temperature=self.config.temperature)
        return format_step(response.text)


__all__ = ["FaithfulGraphCoTAgent", "faithful_prompt", "finish_value", "split_checks", "parse_action",
           "action_list", "remove_quotes", "Observer", "sentences", "cap_counter", "METHOD"]
