"""The GLM multi-agent workflow (Figure 3).

deterministic:     C -> A -> Retriever -> answer (what the snippet printed)
non-deterministic: C -> (R -> A -> Retriever -> notebook)* -> R answers

Fault tolerance: a snippet that cannot be parsed, is rejected by the sandbox, raises, times out or
prints nothing goes back to the A-Agent with the error, its line and a short hint, up to
`max_code_retries` more times per missing fact; an unreadable R-Agent reply is asked again
`max_format_retries` times; at most `max_rounds` R/A rounds. A question that runs out ends with a
failure category (Table 5), never an exception.
"""

from __future__ import annotations

import time

from glmcot.agents.base import AsyncAnswer, QuestionFailed, QuestionRun
from glmcot.graph.graph_source import SourceUnavailable
from glmcot.agents.config import AgentConfig
from glmcot.agents.context import AgentContext
from glmcot.agents.notebook import Notebook
from glmcot.agents.records import QuestionResult
from glmcot.agents.retrieval import PipelineHook
from glmcot.agents.sandbox import ExecutionResult, SandboxError
from glmcot.agents.trace import Classification, NotebookUpdate, Reasoning, SnippetRun
from glmcot.llm import Level, LLMBackend, LLMError, Segment
from glmcot.agents import formats

# Which failure an execution error counts as when retries run out.
_RETRIEVAL_KINDS = {"graph", "retrieval"}


def failure_category(kind: str) -> str:
    if kind == "format":
        return "unexpected_output"
    if kind in _RETRIEVAL_KINDS:
        return "retrieval_error"
    return "code_error"


class GLMAgent(AsyncAnswer):
    method = "glm"

    def __init__(self, backend: LLMBackend, context: AgentContext, config: AgentConfig | None = None):
        self.backend = backend
        self.context = context
        self.config = config or AgentConfig()
        self.prompts = context.prompts(self.config.domain)
        self._names = {getattr(self.prompts, a): self.prompts.name(a) for a in ("classify", "classify_plan", "reason", "act")}

    def answer(self, question: str, qid: str | None = None) -> QuestionResult:
        run = QuestionRun(self.backend, question, qid, self.method, self._names, self.config.on_event)
        try:
            deterministic, first_missing = self._classify(run)
            run.result.deterministic = deterministic
            if deterministic:
                result = self._act(run, run.question, step=0)
                run.result.rounds = 1
                return run.finish(result.output.strip())
            return run.finish(self._loop(run, first_missing))
        except QuestionFailed as failure:
            return run.finish("", failure)
        except LLMError as error:
            return run.finish("", QuestionFailed("backend_error", str(error)))
        except SourceUnavailable as error:
            return run.finish("", QuestionFailed("graph_source_error", str(error)))
        except SandboxError as error:
            return run.finish("", QuestionFailed("code_error", f"sandbox: {error}"))

    # -- agents ---------------------------------------------------------------------------------

    def _classify(self, run: QuestionRun) -> tuple[bool, str | None]:
        plan = self.config.plan_in_classify
        prompt = self.prompts.classify_plan if plan else self.prompts.classify
        segments = [Segment(prompt, Level.SHARED_PROMPT), Segment(f"Question: {run.question}\n", Level.TRANSIENT)]
        response = run.call(
            "classify", segments, max_tokens=self.config.classify_max_tokens,
            stop=formats.CLASSIFY_PLAN_STOP if plan else formats.CLASSIFY_STOP,
            step=0, temperature=self.config.temperature,
        )
        try:
            deterministic = formats.parse_label(response.text)
            parsed = True
        except formats.FormatError:
            # The non-deterministic path can answer anything, so an unreadable label costs calls,
            # not the question.
            deterministic, parsed = False, False
        first_missing = formats.parse_first_missing(response.text) if plan and not deterministic else None
        run.trace.append(Classification(deterministic, parsed, first_missing))
        return deterministic, first_missing

    def _loop(self, run: QuestionRun, first_missing: str | None = None) -> str:
        notebook = Notebook(self.context.chunk_key)
        for round_ in range(self.config.max_rounds + 1):
            if round_ == 0 and first_missing:
                decision = formats.Reasoning(missing=first_missing)
            else:
                decision = self._reason(run, notebook, round_)
            if decision.answer is not None:
                return decision.answer
            if round_ == self.config.max_rounds:
                break
            result = self._act(run, decision.missing, step=round_)
            run.result.rounds = round_ + 1
            added = notebook.add(decision.missing, result.output, result.chunks)
            run.trace.append(NotebookUpdate([s.key or "fact" for s in added]))
        raise QuestionFailed("step_limit", f"no answer after {self.config.max_rounds} reasoning rounds")

    def _reason(self, run: QuestionRun, notebook: Notebook, step: int) -> formats.Reasoning:
        question = Segment(f"Question: {run.question}\n", Level.TRANSIENT)
        hint = None
        last = ""
        for attempt in range(self.config.max_format_retries + 1):
            segments = [Segment(self.prompts.reason, Level.SHARED_PROMPT), *notebook.segments(), question]
            if hint:
                segments.append(Segment(hint, Level.TRANSIENT))
            response = run.call(
                "reason", segments, max_tokens=self.config.reason_max_tokens, stop=formats.REASON_STOP,
                step=step, attempt=attempt, temperature=self.config.temperature,
            )
            try:
                decision = formats.parse_reasoning(response.text)
            except formats.FormatError as error:
                last = str(error)
                hint = "Your last reply could not be read. Reply with <answer>...</answer> or <missing>...</missing> only.\n"
                continue
            run.trace.append(Reasoning(step, attempt, decision.missing, decision.answer))
            return decision
        raise QuestionFailed("unexpected_output", f"R-Agent: {last}")

    def _act(self, run: QuestionRun, missing: str, step: int) -> ExecutionResult:
        config = self.config
        prompts = self.prompts
        retry: tuple[str, str, str] | None = None  # (code, error text, kind)
        for attempt in range(config.max_code_retries + 1):
            segments = [Segment(prompts.act, Level.SHARED_PROMPT), Segment(f"Needed: {missing}\n", Level.TRANSIENT)]
            if retry is not None:
                code, error_text, kind = retry
                segments.append(
                    Segment(prompts.act_retry.format(code=code, error=error_text, hint=prompts.hints.get(kind, "")), Level.TRANSIENT)
                )
            hook = PipelineHook(self.context.retrieval) if config.pipelining else None
            response = run.call(
                "act", segments, max_tokens=config.act_max_tokens, stop=formats.ACT_STOP, step=step,
                attempt=attempt, temperature=config.temperature, on_line=hook,
            )
            decode_end = time.perf_counter() - hook.t0 if hook else 0.0
            try:
                code = formats.parse_code(response.text)
            except formats.FormatError as error:
                retry = (response.text.strip()[:500], str(error), "format")
                run.trace.append(SnippetRun(step, attempt, None, {"ok": False, "error": {"kind": "format", "message": str(error)}}))
                continue
            result = self.context.executor.run(code, resolve=self.context.retrieval.resolve)
            run.result.retrieval_time_s += result.retrieval_s
            for timing in hook.timings(step, attempt, decode_end) if hook else []:
                run.trace.append(timing)   # after the run: the searches it waited for have ended
            run.trace.append(SnippetRun(
                step, attempt, code, result.to_dict(), prefetched=list(hook.started) if hook else [],
                prefetch_at_s=round(hook.first_at, 6) if hook and hook.first_at is not None else None))
            if result.ok and result.output.strip():
                return result
            if result.ok:
                retry = (code, "the snippet printed nothing", "empty")
            else:
                retry = (code, result.error_text(), result.error.get("kind", "exception"))
        code, error_text, kind = retry
        kind = "exception" if kind == "empty" else kind
        raise QuestionFailed(failure_category(kind), f"A-Agent step {step}: {error_text}")
