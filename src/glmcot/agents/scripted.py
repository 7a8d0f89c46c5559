"""The scripted policy: answers every agent call as an ideal model would, from the question's gold
plan (questions.jsonl, docs/contracts.md). It measures the system (tokens, calls, cache, latency),
never model accuracy; every output it produces is labelled "scripted policy".

It reads only what a model could see plus the request metadata (qid, agent, step):
- classify: the record's `deterministic` flag;
- reason: the next plan step's missing information, or, once all steps ran, the answer copied
  from the notebook's last fact (so a retrieval miss gives a wrong answer, as with a real model);
- act: the plan step's code;
- Graph-CoT thought/action: the plan's thoughts and actions, with `$k` / `$k[*]` filled in from
  the observations in the prompt and `$answer` = what the GLM plan's last step prints when run
  (through `code_runner`, the same sandbox the agents use).

With `inner` set (the native engine), the text is force-decoded through the model so compute and
token counts are real; otherwise counts come from the Qwen tokenizer.
"""

from __future__ import annotations

import ast
import json
import re
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable

from glmcot.agents import formats
from glmcot.llm.tokens import TokenCounter, qwen_counter
from glmcot.llm.types import LineSplitter, LLMBackend, LLMError, LLMRequest, LLMResponse, cut_at_stop

SCRIPTED_LABEL = "scripted policy"


def load_questions(source: str | Path | Iterable[Any]) -> dict[str, dict]:
    """qid -> record, from a questions.jsonl path or an iterable of records (QuestionRecord from
    glmcot.data, or their JSON form)."""
    if isinstance(source, (str, Path)):
        records = []
        with open(source, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError as error:
                        raise ValueError(f"{source}:{number}: not JSON ({error.msg})") from None
    else:
        records = [record.to_json() if hasattr(record, "to_json") else record for record in source]
    table = {}
    for record in records:
        if "qid" not in record:
            raise ValueError(f"question record without qid: {str(record)[:120]}")
        table[str(record["qid"])] = record
    return table


# Graph-CoT observation sentences (grbench.md §2), as prefixes for the value of one call.
def _observation_prefix(name: str, args: list[str]) -> str | None:
    if name == "RetrieveNode":
        return "The ID of this retrieval target node is "
    if name == "NodeFeature" and len(args) == 2:
        return f"The {args[1]} feature of {args[0]} are: "
    if name == "NeighbourCheck" and len(args) == 2:
        return f"The {args[1]} neighbors of {args[0]} are: "
    if name == "NodeDegree" and len(args) == 2:
        return f"The {args[1]} neighbor node degree of {args[0]} are: "
    return None


def _literal(text: str) -> Any:
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def _template_actions(template: str) -> list[formats.Action]:
    """Bracket actions of a plan template, brackets balanced (`NodeFeature[$1[*], name]`)."""
    actions = []
    position = 0
    while True:
        match = re.compile(r"(\w+)\[").search(template, position)
        if not match:
            return actions
        depth, index = 1, match.end()
        while index < len(template) and depth:
            depth += {"[": 1, "]": -1}.get(template[index], 0)
            index += 1
        argument = template[match.end(): index - 1 if depth == 0 else index]
        actions.append(formats.Action(match.group(1), argument))
        position = index


class _Session:
    def __init__(self) -> None:
        self.actions: dict[int, list[formats.Action]] = {}


class ScriptedBackend(LLMBackend):
    """See the module docstring. `questions`: qid -> record (or a path / records)."""

    def __init__(
        self,
        questions: dict[str, dict] | str | Path | Iterable[dict],
        *,
        inner: LLMBackend | None = None,
        code_runner: Callable[[str], str] | None = None,
        counter: TokenCounter | None = None,
        stream_pieces: bool = True,
    ):
        self.questions = load_questions(questions.values() if isinstance(questions, dict) else questions)
        self.inner = inner
        self.code_runner = code_runner
        self._counter = counter
        self.stream_pieces = stream_pieces
        self.label = SCRIPTED_LABEL if inner is None else f"{SCRIPTED_LABEL} on {inner.label}"
        self._sessions: dict[str, _Session] = {}
        self._answers: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = qwen_counter()
        return self._counter

    # -- the policy ----------------------------------------------------------------------------

    def script(self, request: LLMRequest) -> str:
        """The full text an ideal model writes for this call (before stop strings cut it)."""
        meta = request.metadata
        qid = meta.get("qid")
        if qid is None or str(qid) not in self.questions:
            raise LLMError(f"{SCRIPTED_LABEL}: request metadata names no known question (qid={qid!r})")
        record = self.questions[str(qid)]
        agent = meta.get("agent")
        step = int(meta.get("step", 0))
        plan = record.get("plan") or {}
        glm = plan.get("glm") or []
        if agent == "classify":
            deterministic = bool(record.get("deterministic")) and len(glm) == 1
            label = formats.render_label(deterministic)
            # With the paper's flow the stop string (</label>) cuts the plan off; with
            # classify-and-plan the first missing information is read from it.
            if not deterministic and glm:
                label += formats.render_missing(glm[0]["missing"])
            return label
        if agent == "reason":
            if step < len(glm):
                return formats.render_missing(glm[step]["missing"])
            return formats.render_answer(self._notebook_answer(request))
        if agent == "act":
            if not glm:
                raise LLMError(f"{SCRIPTED_LABEL}: question {qid} has no GLM plan")
            return formats.render_code(glm[min(step, len(glm) - 1)]["code"])
        if agent in ("graphcot-thought", "graphcot-action"):
            steps = plan.get("graphcot") or []
            if not steps:
                raise LLMError(f"{SCRIPTED_LABEL}: question {qid} has no Graph-CoT plan")
            index = min(step, len(steps) - 1)
            if agent == "graphcot-thought":
                return steps[index]["thought"].replace("\n", " ")
            return self._graphcot_action(request, record, index, steps[index]["action"])
        raise LLMError(f"{SCRIPTED_LABEL}: unknown agent {agent!r} in request metadata")

    def _notebook_answer(self, request: LLMRequest) -> str:
        last = None
        for segment in request.segments:
            if segment.key is None and segment.level == 2:
                fact = formats.parse_fact(segment.text)
                if fact is not None:
                    last = fact
        return last[2].strip() if last else "unknown"

    def _graphcot_action(self, request: LLMRequest, record: dict, index: int, template: str) -> str:
        session_id = request.session or str(record["qid"])
        with self._lock:
            session = self._sessions.setdefault(session_id, _Session())
        parsed = _template_actions(template)
        if len(parsed) == 1 and parsed[0].name == "Finish":
            argument = parsed[0].argument
            if "$answer" in argument:
                argument = argument.replace("$answer", self._answer(record))
            argument = self._substitute(argument, session, request)
            actions = [formats.Action("Finish", argument)]
        else:
            actions = []
            for action in parsed:
                actions.extend(self._expand(action, session, request))
        session.actions[index] = actions
        return formats.render_actions(actions)

    def _expand(self, action: formats.Action, session: _Session, request: LLMRequest) -> list[formats.Action]:
        star = re.search(r"\$(\d+)\[\*\]", action.argument)
        if star:
            values = self._value(int(star.group(1)), session, request)
            # Same semantics as glmcot.data.plans: `$k[*]` over an expanded action runs over the
            # flattened per-call results (one level), not over their list reprs.
            flat: list[Any] = []
            for value in values if isinstance(values, list) else [values]:
                flat.extend(value if isinstance(value, list) else [value])
            out = []
            for value in flat:
                out.append(formats.Action(action.name, action.argument.replace(star.group(0), str(value), 1)))
            return [formats.Action(a.name, self._substitute(a.argument, session, request)) for a in out]
        return [formats.Action(action.name, self._substitute(action.argument, session, request))]

    def _substitute(self, argument: str, session: _Session, request: LLMRequest) -> str:
        def value(match: re.Match) -> str:
            result = self._value(int(match.group(1)), session, request)
            if isinstance(result, list):
                return ", ".join(str(item) for item in result)
            return str(result)

        return re.sub(r"\$(\d+)(?!\[)", value, argument)

    def _value(self, k: int, session: _Session, request: LLMRequest) -> Any:
        """The result of action k as seen in 'Observation k+1' of the prompt: one value per call
        (a single call gives the value itself)."""
        actions = session.actions.get(k)
        if not actions:
            return ""
        text = request.prompt
        marker = f"Observation {k + 1}: "
        start = text.rfind(marker)
        if start == -1:
            return ""
        observation = text[start + len(marker):]
        end = re.search(r"\n(?:Thought|Action) \d+:", observation)
        if end:
            observation = observation[: end.start()]
        values = []
        position = 0
        for number, action in enumerate(actions):
            args = [part.strip().strip("'\"") for part in action.argument.split(", ")]
            prefix = _observation_prefix(action.name, args)
            if prefix is None:
                values.append("")
                continue
            found = observation.find(prefix, position)
            if found == -1:
                values.append("")
                continue
            begin = found + len(prefix)
            following = None
            if number + 1 < len(actions):
                nxt = actions[number + 1]
                nxt_prefix = _observation_prefix(nxt.name, [p.strip().strip("'\"") for p in nxt.argument.split(", ")])
                if nxt_prefix is not None:
                    spot = observation.find(nxt_prefix, begin)
                    following = spot if spot != -1 else None
            raw = observation[begin:following].rstrip()
            if raw.endswith("."):
                raw = raw[:-1]
            position = begin
            values.append(_literal(raw) if action.name != "RetrieveNode" else raw.strip())
        return values[0] if len(values) == 1 else values

    def _answer(self, record: dict) -> str:
        qid = str(record["qid"])
        with self._lock:
            if qid in self._answers:
                return self._answers[qid]
        if self.code_runner is None:
            raise LLMError(
                f"{SCRIPTED_LABEL}: Graph-CoT Finish[$answer] needs a code runner (the sandbox) to run "
                "the GLM plan's last step; build the backend with code_runner=..."
            )
        answer = self.code_runner(record["plan"]["glm"][-1]["code"]).strip()
        with self._lock:
            self._answers[qid] = answer
        return answer

    # -- the backend ---------------------------------------------------------------------------

    def complete(self, request: LLMRequest) -> LLMResponse:
        full = self.script(request)
        text, _ = cut_at_stop(full, request.stop)
        if self.inner is not None:
            forced = replace(request, forced_text=text)
            response = self.inner.complete(forced)
            response.backend = self.label
            return response
        started = time.perf_counter()
        finish = "stop"
        truncate = getattr(self.counter, "truncate", None)
        if truncate is not None and request.max_tokens:
            # A server stops at max_tokens; so does the policy, so a too-small limit shows up.
            cut = truncate(text, request.max_tokens)
            if cut != text:
                text, finish = cut, "length"
        splitter = LineSplitter(request.on_delta, request.on_line)
        if self.stream_pieces:
            for piece in re.findall(r"[^\n]*\n|[^\n]+$", text):
                splitter.feed(piece)
        else:
            splitter.feed(text)
        splitter.finish()
        prompt_tokens = self.counter.count(request.prompt)
        output_tokens = self.counter.count(text)
        latency = time.perf_counter() - started
        return LLMResponse(
            text=text,
            prompt_tokens=prompt_tokens,
            cached_tokens=0,
            output_tokens=output_tokens,
            latency_s=latency,
            ttft_s=latency,
            finish_reason=finish,
            backend=self.label,
        )

    def end_session(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)
        if self.inner is not None:
            self.inner.end_session(session_id)

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()
