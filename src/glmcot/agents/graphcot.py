"""The repaired Graph-CoT baseline (method ``graphcot-repaired``): the original's loop (a ReAct
loop of Thought and Action as two LLM calls per step over the whole growing prompt, bracket
actions, newline stops, `graphcot_max_steps` steps, a prompt cap of `graphcot_token_cap` Qwen
tokens; a halted question answers '' with failure "step_limit") with fixes that make it stronger
than the original: lenient action parsing, `<think>` blocks stripped, Finish taken first and
verbatim, one merged "does not exist" sentence and argument errors that say what is expected,
our own shorter prompt. Label it as repaired wherever it is reported; the faithful one, to
compare with published numbers, is ``graphcot`` (agents/graphcot_faithful.py)."""

from __future__ import annotations


from glmcot.agents.base import AsyncAnswer, QuestionFailed, QuestionRun
from glmcot.graph.graph_source import SourceUnavailable
from glmcot.agents.config import AgentConfig
from glmcot.agents.context import AgentContext
from glmcot.agents.records import QuestionResult
from glmcot.graph.tools.graphcot import INVALID_ACTION, GraphCoTObserver
from glmcot.agents.retrieval import TimedResolver
from glmcot.agents.trace import GraphCoTStep
from glmcot.llm import Level, LLMBackend, LLMError, Segment
from glmcot.agents import formats
from glmcot.llm.tokens import TokenCounter, qwen_counter


class _ResolveAsRetriever:
    """The observer's retriever: RetrieveNode through the shared service (cache, timing)."""

    def __init__(self, resolve):
        self.resolve = resolve

    def retrieve(self, text: str) -> str:
        return self.resolve(text)


def observe(observer: GraphCoTObserver, action: formats.Action) -> str:
    """One action's observation; arguments split on ", " as the original does."""
    if action.name == "RetrieveNode":
        return observer.observe("RetrieveNode", [action.argument])
    return observer.observe(action.name, action.argument.split(", "))


class GraphCoTAgent(AsyncAnswer):
    """The repaired Graph-CoT baseline."""

    method = "graphcot-repaired"

    def __init__(self, backend: LLMBackend, context: AgentContext, config: AgentConfig | None = None, counter: TokenCounter | None = None):
        self.backend = backend
        self.context = context
        self.config = config or AgentConfig()
        self.prompts = context.prompts(self.config.domain, graphcot_examples=self.config.graphcot_examples)
        self.counter = counter or qwen_counter()
        self._names = {self.prompts.graphcot: self.prompts.name("graphcot")}

    def answer(self, question: str, qid: str | None = None) -> QuestionResult:
        run = QuestionRun(self.backend, question, qid, self.method, self._names, self.config.on_event)
        resolve = TimedResolver(self.context.retrieval.resolve)
        observer = GraphCoTObserver(self.context.graph, retriever=_ResolveAsRetriever(resolve))
        head = Segment(self.prompts.graphcot, Level.SHARED_PROMPT)
        opening = self.prompts.graphcot_question.format(question=run.question).rstrip("\n")
        scratchpad = ""
        config = self.config
        try:
            for step in range(1, config.graphcot_max_steps + 1):
                if self.counter.count(head.text + opening + scratchpad) > config.graphcot_token_cap:
                    raise QuestionFailed("step_limit", f"the prompt passed {config.graphcot_token_cap} tokens at step {step}")
                response = run.call(
                    "graphcot-thought", [head, Segment(opening + scratchpad + f"\nThought {step}:", Level.NOTEBOOK)],
                    max_tokens=config.graphcot_max_tokens, stop=formats.GRAPHCOT_STOP, step=step - 1,
                    temperature=config.temperature,
                )
                thought = formats.clean_step_text(response.text, "Thought", step)
                scratchpad += f"\nThought {step}: {thought}"
                response = run.call(
                    "graphcot-action", [head, Segment(opening + scratchpad + f"\nAction {step}:", Level.NOTEBOOK)],
                    max_tokens=config.graphcot_max_tokens, stop=formats.GRAPHCOT_STOP, step=step - 1,
                    temperature=config.temperature,
                )
                action_line = formats.clean_step_text(response.text, "Action", step)
                scratchpad += f"\nAction {step}: {action_line}"
                actions = formats.parse_actions(action_line)
                run.result.rounds = step
                if actions and actions[0].name == "Finish":
                    run.trace.append(GraphCoTStep(step, thought, action_line, None))
                    run.result.retrieval_time_s = resolve.seconds
                    return run.finish(actions[0].argument.strip())
                if not actions:
                    observation = INVALID_ACTION
                else:
                    observation = "".join(observe(observer, a) for a in actions)
                observation = " ".join(observation.split("\n")).strip()
                scratchpad += f"\nObservation {step}: {observation}"
                run.trace.append(GraphCoTStep(step, thought, action_line, observation))
            raise QuestionFailed("step_limit", f"no Finish within {config.graphcot_max_steps} steps")
        except QuestionFailed as failure:
            run.result.retrieval_time_s = resolve.seconds
            return run.finish("", failure)
        except LLMError as error:
            run.result.retrieval_time_s = resolve.seconds
            return run.finish("", QuestionFailed("backend_error", str(error)))
        except SourceUnavailable as error:
            run.result.retrieval_time_s = resolve.seconds
            return run.finish("", QuestionFailed("graph_source_error", str(error)))
