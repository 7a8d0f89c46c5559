"""LLM: the offline, batched entry point."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from glmcot.engine.config import EngineConfig
from glmcot.engine.core.llm_engine import LLMEngine, Prompt
from glmcot.engine.outputs import RequestOutput
from glmcot.engine.sampling_params import SamplingParams


class LLM:
    """`LLM(EngineConfig(...))` or `LLM(model="random:qwen3:tiny", dtype=...)`."""

    def __init__(self, config: EngineConfig | None = None, hash_fn: Callable | None = None, **kwargs: Any) -> None:
        if config is None:
            config = EngineConfig(**kwargs)
        elif kwargs:
            raise TypeError("give an EngineConfig or keyword arguments, not both")
        self.engine = LLMEngine(config, hash_fn=hash_fn)
        self.config = config

    @property
    def tokenizer(self):
        return self.engine.tokenizer

    def generate(self, prompts: Prompt | Sequence[Prompt], sampling: SamplingParams | Sequence[SamplingParams] | None = None,
                 priorities: Sequence[int] | None = None, progress: bool = False,
                 sessions: Sequence[str | None] | None = None) -> list[RequestOutput]:
        """Run all prompts to completion, batched; outputs come back in prompt order. A single
        str prompt or a flat token-id list counts as one prompt. `sessions`: one session id (or
        None) per prompt; see end_session."""
        if isinstance(prompts, str) or (prompts and all(isinstance(t, int) or hasattr(t, "level") for t in prompts)):
            prompts = [prompts]  # one text, one token-id list or one Segment list
        prompts = list(prompts)
        params = list(sampling) if isinstance(sampling, Sequence) else [sampling or SamplingParams()] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(params)} SamplingParams")
        for prompt in prompts:  # fail before anything runs
            self.engine.check_fits(len(self.engine.tokenize_prompt(prompt)[0]))
        ids = [self.engine.add_request(p, s, priority=(priorities[i] if priorities else 0),
                                       session=(sessions[i] if sessions else None)).request_id
               for i, (p, s) in enumerate(zip(prompts, params))]
        results: dict[str, RequestOutput] = {}
        bar = _progress(progress, len(ids))
        try:
            while self.engine.has_unfinished():
                for out in self.engine.step():
                    results[out.request_id] = out
                    if bar:
                        bar[0].advance(bar[1])
        finally:
            if bar:
                bar[0].stop()
        return [results[i] for i in ids]

    def end_session(self, session_id: str) -> int:
        """The session finished: its P2 (notebook) blocks fall to P3. Returns how many."""
        return self.engine.end_session(session_id)

    def stats(self) -> dict[str, Any]:
        return self.engine.stats()


def _progress(enabled: bool, total: int):
    if not enabled:
        return None
    from rich.progress import Progress

    progress = Progress(transient=True)
    task = progress.add_task("generating", total=total)
    progress.start()
    return progress, task
