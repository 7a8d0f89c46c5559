"""Answer metrics: ROUGE-L (rouge-score, Graph-CoT eval.py defaults), normalised exact match
(Graph-CoT's in-loop check), and an LLM judge with the GPT4score protocol (one word, Yes or No)."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Sequence

_ARTICLES = re.compile(r"\b(a|an|the|usd)\b")
_PUNCTUATION = set(string.punctuation)


def as_text(answer: Any) -> str:
    """Predictions may be None or lists (Graph-CoT's Finish[] evals list literals)."""
    if answer is None:
        return ""
    if isinstance(answer, (list, tuple)):
        return ", ".join(as_text(a) for a in answer)
    return str(answer)


def normalize_answer(text: Any) -> str:
    """Lowercase, drop punctuation, drop a/an/the/usd, collapse whitespace (in that order)."""
    lowered = as_text(text).lower()
    no_punct = "".join(ch for ch in lowered if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", no_punct).split())


def exact_match(prediction: Any, gold: Any) -> bool:
    return normalize_answer(prediction) == normalize_answer(gold)


@lru_cache(maxsize=1)
def _scorer():
    from rouge_score import rouge_scorer

    # Graph-CoT's eval.py goes through HF evaluate's rouge: no stemmer, default tokenizer.
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def rouge_l(prediction: Any, gold: Any) -> float:
    """ROUGE-L F1 of one prediction against one reference."""
    return float(_scorer().score(as_text(gold), as_text(prediction))["rougeL"].fmeasure)


def mean_rouge_l(predictions: Sequence[Any], golds: Sequence[Any]) -> float:
    if not predictions:
        return 0.0
    return sum(rouge_l(p, g) for p, g in zip(predictions, golds)) / len(predictions)


# ---- LLM judge ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class JudgePrompt:
    system: str
    user: str


@lru_cache(maxsize=1)
def judge_prompt() -> JudgePrompt:
    """The judge prompt, a package data file with a system part and a user template."""
    text = resources.files("glmcot.eval").joinpath("prompts/judge.txt").read_text(encoding="utf-8")
    system, _, user = text.partition("\n---\n")
    return JudgePrompt(system=system.strip(), user=user.strip())


def render_judge(question: str, prediction: Any, gold: Any) -> tuple[str, str]:
    prompt = judge_prompt()
    user = (prompt.user.replace("{question}", as_text(question).strip())
            .replace("{prediction}", as_text(prediction).strip() or "(empty)")
            .replace("{gold}", as_text(gold).strip()))
    return prompt.system, user


def parse_judge_reply(reply: str) -> bool | None:
    """Yes -> True, No -> False, anything else -> None (counted as unparsed, never a hang)."""
    words = re.findall(r"[a-z]+", (reply or "").lower())
    if not words:
        return None
    if words[0] == "yes":
        return True
    if words[0] == "no":
        return False
    return None


def judge(backend: Any, question: str, prediction: Any, gold: Any, qid: str | None = None) -> tuple[bool | None, str]:
    """Asks a judge backend (glmcot.llm) whether the prediction is right. Returns (verdict, raw reply)."""
    from glmcot.llm import LLMRequest, Segment

    system, user = render_judge(question, prediction, gold)
    request = LLMRequest(
        segments=[Segment(text=system, level=1, key=None), Segment(text=user, level=4, key=None)],
        max_tokens=4, temperature=0.0, stop=["\n"],
        metadata={"qid": qid, "agent": "judge", "step": 0, "attempt": 0},
    )
    response = backend.complete(request)
    return parse_judge_reply(response.text), response.text
