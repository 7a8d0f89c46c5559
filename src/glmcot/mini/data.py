"""Training examples for glmcot-mini: the scripted policy answers the GLM agents' C/R/A calls (and,
on chosen seeds, Graph-CoT's single-agent calls) over synthetic graphs of every domain, and each
call becomes one (compact prompt, reply) pair.

Fault turns: on some questions the first A-Agent snippet is replaced by a broken one (a syntax
error, an unknown name, a wrong relation); the agent sends the error back and the scripted policy
writes the gold snippet, so the model sees the repair turn. The broken snippet itself is never a
training target. Evaluation seeds are disjoint from training seeds (`split_seeds`).
"""

from __future__ import annotations

import json
import re
import threading
import zlib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from glmcot.data.schemas import DOMAINS
from glmcot.files import write_rows_atomic
from glmcot.llm.types import LLMBackend, LLMRequest, LLMResponse, cut_at_stop
from glmcot.mini.compact import compact_segments

DATA_FORMAT = "glmcot-mini-examples/1"


@dataclass
class Example:
    """One agent call: the compact prompt's segment texts and the reply the model must write
    (ending with the stop string the agent waits for)."""

    domain: str
    seed: int
    qid: str
    template: str
    agent: str
    step: int
    attempt: int
    segments: list[str]
    reply: str
    repair: bool = False  # the prompt carries a failed snippet and its error

    @property
    def prompt(self) -> str:
        return "".join(self.segments)


@dataclass
class DataConfig:
    domains: tuple[str, ...] = DOMAINS
    train_seeds: tuple[int, ...] = (1, 2, 3)
    eval_seeds: tuple[int, ...] = (1001,)
    questions_per_template: int = 4
    fault_rate: float = 0.25  # share of questions whose first snippet is broken
    workers: int = 2  # questions in flight per graph
    processes: int = 1  # graphs collected at once (each in its own process)
    # Training graphs phrase questions with every wording but each template's last one, which only
    # evaluation graphs use: the benchmark then scores seen and never-read phrasings apart.
    hold_out_wordings: bool = True
    # Training seeds whose questions also go through Graph-CoT's single-agent loop, so the same
    # model can be compared in both loops.
    graphcot_seeds: tuple[int, ...] = ()
    # Copy drills: for this share of the act calls whose RetrieveNode argument is copied from the
    # prompt, one more example with that argument replaced, in prompt and reply alike, by a random
    # run of words. A small model otherwise learns to write title-like text instead of copying.
    copy_drills: float = 0.0
    # Share of the drills whose replacement words are made up (syllables), not training words.
    made_up_drills: float = 0.0


@dataclass
class Collected:
    train: list[Example] = field(default_factory=list)
    eval: list[Example] = field(default_factory=list)
    eval_questions: dict[str, list[dict]] = field(default_factory=dict)  # "domain/seed" -> records
    counts: dict[str, int] = field(default_factory=dict)


def split_seeds(config: DataConfig) -> None:
    overlap = set(config.train_seeds) & set(config.eval_seeds)
    if overlap:
        raise ValueError(f"seeds {sorted(overlap)} are both training and evaluation seeds; evaluation graphs must be held out")


def broken_snippet(code: str, kind: int) -> str:
    """A wrong version of a gold snippet: what a model might write first."""
    if kind % 3 == 0:
        return code.replace("print(", "print((", 1)  # an unclosed parenthesis
    if kind % 3 == 1:
        return re.sub(r"\bfound\b|\bnode\b", "nodes_found", code, count=1)  # an undefined name
    relation = re.search(r'NeighbourCheck\(([^,]+), "([^"]+)"\)', code)
    if relation:
        return code.replace(f'"{relation.group(2)}"', f'"{relation.group(2)}_of"', 1)
    return code.replace("print(", "print(undefined_value, ", 1)


class Collector(LLMBackend):
    """Wraps the scripted policy: records each call as an Example and, on chosen questions,
    answers the first A-Agent attempt with a broken snippet."""

    def __init__(self, scripted, records: dict[str, dict], *, domain: str, seed: int, fault_rate: float):
        self.scripted = scripted
        self.records = records
        self.domain, self.seed, self.fault_rate = domain, seed, fault_rate
        self.label = scripted.label
        self.examples: list[Example] = []
        self._lock = threading.Lock()

    def _faulty(self, qid: str) -> bool:
        return (zlib.crc32(f"{self.seed}/{qid}".encode()) % 1000) < self.fault_rate * 1000

    def complete(self, request: LLMRequest) -> LLMResponse:
        meta = request.metadata
        agent, qid = str(meta.get("agent")), str(meta.get("qid"))
        attempt, step = int(meta.get("attempt", 0)), int(meta.get("step", 0))
        full = self.scripted.script(request)
        text, found = cut_at_stop(full, request.stop)
        reply = text + (next(s for s in request.stop if full[len(text):].startswith(s)) if found else "")
        segments = compact_segments(list(request.segments), agent)
        example = Example(self.domain, self.seed, qid, str(self.records.get(qid, {}).get("template", "")), agent, step, attempt,
                          [s.text for s in segments], reply, repair=agent == "act" and attempt > 0)
        if agent == "act" and attempt == 0 and self._faulty(qid):
            code = re.search(r"<code>\n?(.*?)\n?</code>", full, re.S)
            if code:
                bad = broken_snippet(code.group(1), zlib.crc32(qid.encode()) + step)
                return LLMResponse(f"<code>\n{bad}\n", 1, 0, 1, 0.0, backend=self.label)
        with self._lock:
            self.examples.append(example)
        return self.scripted.complete(request)

    def end_session(self, session_id: str) -> None:
        self.scripted.end_session(session_id)


@dataclass(frozen=True)
class GraphJob:
    graph_dir: Path
    domain: str
    seed: int
    fault_rate: float
    workers: int
    questions_per_template: int
    wordings: str  # glmcot.data.templates.base.Wordings value
    methods: tuple[str, ...]


def ensure_synth_graph(graph_dir: Path, domain: str, seed: int, per_template: int, wordings: str = "all") -> Path:
    """The synthetic graph and questions of (domain, seed), made unless the folder already holds
    them with the same wordings."""
    from glmcot.data.synth.generate import SynthConfig, generate

    meta = graph_dir / "meta.json"
    made = (graph_dir / "questions.jsonl").is_file() and meta.is_file()
    if not made or json.loads(meta.read_text(encoding="utf-8")).get("wordings", "all") != wordings:
        generate(SynthConfig(domain, seed=seed, questions_per_template=per_template, wordings=wordings), graph_dir, force=True)
    return graph_dir


def _collect_job(job: GraphJob) -> tuple[list[Example], list[dict]]:
    ensure_synth_graph(job.graph_dir, job.domain, job.seed, job.questions_per_template, job.wordings)
    return collect_graph(job.graph_dir, job.domain, job.seed, job.fault_rate, job.workers, job.methods)


def collect_graph(graph_dir: Path, domain: str, seed: int, fault_rate: float, workers: int = 2,
                  methods: tuple[str, ...] = ("glm",)) -> tuple[list[Example], list[dict]]:
    """Runs each method's agent with the scripted policy over one graph's questions."""
    from glmcot.agents import AgentContext
    from glmcot.agents.config import AgentConfig
    from glmcot.agents.runner import run_questions
    from glmcot.agents.scripted import ScriptedBackend

    records = [json.loads(line) for line in (graph_dir / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    order = {str(r["qid"]): i for i, r in enumerate(records)}
    examples: list[Example] = []
    context = AgentContext(graph_dir, retriever="lexical", workers=workers, domain=domain)
    try:
        for method in methods:
            scripted = ScriptedBackend(records, code_runner=context.run_code, counter=_CharCounter())
            collector = Collector(scripted, {str(r["qid"]): r for r in records}, domain=domain, seed=seed, fault_rate=fault_rate)
            run_questions(records, method=method, backend=collector, context=context, config=AgentConfig(domain=domain),
                          concurrency=workers, traces=None)
            # questions run concurrently: order the calls so the data set does not depend on timing
            examples.extend(sorted(collector.examples, key=lambda e: (order.get(e.qid, 0), e.step, e.agent, e.attempt)))
    finally:
        context.close()
    return examples, records


class _CharCounter:
    """Token counts are not needed while collecting; avoid loading the Qwen tokenizer."""

    def count(self, text: str) -> int:
        return max(1, len(text) // 4)


def collect(config: DataConfig, work_dir: str | Path, progress: Callable[[str], None] | None = None) -> Collected:
    """Synthetic graphs for every (domain, seed), then their examples; eval seeds go to `eval`."""
    split_seeds(config)
    work = Path(work_dir)
    out = Collected()
    jobs = [(domain, seed, seed in config.eval_seeds) for seed in (*config.train_seeds, *config.eval_seeds) for domain in config.domains]
    arguments = [GraphJob(work / f"{domain}-{seed}", domain, seed, 0.0 if held_out else config.fault_rate, config.workers,
                          config.questions_per_template, "seen" if config.hold_out_wordings and not held_out else "all",
                          ("glm", "graphcot") if seed in config.graphcot_seeds and not held_out else ("glm",))
                 for domain, seed, held_out in jobs]
    if config.processes > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn: the parent may hold threads (progress bars, torch) that fork would copy mid-state
        pool = ProcessPoolExecutor(max_workers=config.processes, mp_context=multiprocessing.get_context("spawn"))
        outcomes = pool.map(_collect_job, arguments)
    else:
        pool = None
        outcomes = map(_collect_job, arguments)
    try:
        # results come back in job order, so the data set is the same for any process count
        for (domain, seed, held_out), (examples, records) in zip(jobs, outcomes):
            (out.eval if held_out else out.train).extend(examples)
            if held_out:
                out.eval_questions[f"{domain}/{seed}"] = records
            if progress:
                progress(f"{domain} seed {seed}: {len(examples)} calls")
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    drills = copy_drills(out.train, config.copy_drills, config.made_up_drills)
    out.train.extend(drills)
    out.counts = {"train_examples": len(out.train), "eval_examples": len(out.eval), "train_copy_drills": len(drills),
                  "train_repair_examples": sum(e.repair for e in out.train),
                  "train_graphcot_examples": sum(e.agent.startswith("graphcot") for e in out.train),
                  "eval_questions": sum(len(v) for v in out.eval_questions.values())}
    return out


_RETRIEVE = re.compile(r'RetrieveNode\("([^"\n]+)"\)|RetrieveNode\[([^\]\n]+)\]')


_SYLLABLES = ("ka", "lo", "mir", "tes", "du", "vo", "ran", "pel", "qui", "zo", "bri", "fen", "gal", "hu", "ix", "jor",
              "nel", "ost", "pra", "sul", "tri", "ux", "wen", "yal", "zed", "ca", "mo", "ne", "ri", "sta")


def _made_up_word(rng) -> str:
    """A word no training text holds: the model can only write it by copying."""
    word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4)))
    return word.capitalize() if rng.random() < 0.6 else word


def copy_drills(examples: list[Example], share: float, made_up: float = 0.0) -> list[Example]:
    """Variants of act calls (GLM and Graph-CoT) with each RetrieveNode argument that the prompt
    holds verbatim replaced by random words: words of the examples' questions, or (share `made_up`)
    made-up words that no training text holds, so that only copying writes them. `share` above 1
    makes int(share) drills per call and one more with the fractional chance. Seeded by the
    example, so the same data gives the same drills."""
    if share <= 0:
        return []
    words = sorted({word for e in examples if e.agent == "classify" for word in re.findall(r"[A-Za-z][A-Za-z'-]+", e.prompt)})
    if not words:
        return []
    import random

    drills = []
    for example in examples:
        if example.agent not in ("act", "graphcot-action") or example.repair:
            continue
        arguments = {a or b for a, b in _RETRIEVE.findall(example.reply)}
        arguments = {a for a in arguments if len(a) >= 3 and a in example.prompt}
        key = f"{example.domain}/{example.seed}/{example.qid}/{example.agent}/{example.step}/{example.attempt}"
        rng = random.Random(zlib.crc32(key.encode()))
        count = int(share) + (rng.random() < share - int(share))
        if not arguments:
            continue
        for round_ in range(count):
            segments, reply = list(example.segments), example.reply
            invent = rng.random() < made_up
            for argument in sorted(arguments, key=len, reverse=True):
                pick = (lambda: _made_up_word(rng)) if invent else (
                    lambda: rng.choice(words).capitalize() if rng.random() < 0.5 else rng.choice(words))
                made = " ".join(pick() for _ in range(rng.randint(1, 7)))
                if rng.random() < 0.2:
                    made += f" {rng.randint(2, 999)}"
                segments = [segment.replace(argument, made) for segment in segments]
                reply = reply.replace(argument, made)
            suffix = "~copy" if round_ == 0 else f"~copy{round_ + 1}"
            drills.append(Example(example.domain, example.seed, example.qid + suffix, example.template, example.agent, example.step,
                                  example.attempt, segments, reply))
    return drills


def write_examples(examples: Iterable[Example], path: str | Path) -> int:
    """JSON Lines, one example a line (written atomically)."""
    rows = [{"format": DATA_FORMAT, **asdict(example)} for example in examples]
    write_rows_atomic(path, rows)
    return len(rows)


def read_examples(path: str | Path) -> list[Example]:
    examples = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not JSON ({error.msg})") from None
        record.pop("format", None)
        examples.append(Example(**record))
    return examples
