"""Answer metrics, each named for what it is:

- ROUGE-L: rouge-score's per-pair F1 (Graph-CoT eval.py's defaults), aggregated as the mean and,
  beside it, as Graph-CoT reports it (HF evaluate's bootstrap median; here seeded, so reruns agree).
- EM: normalised (Graph-CoT's in-loop check) and exact string equality (its eval.py's
  ``exact_match``).
- LLM judge, two rules: ``original`` is GPT4score as Graph-CoT's eval.py runs it (its prompt,
  prompts/judge_original.txt, and only a reply of exactly "Yes" scores 1; every other reply
  scores 0 and stays in the denominator); ``lenient`` is glmcot's reworded prompt with a lenient
  yes/no reading that leaves unreadable replies out. The judge model is a setting of its own.
"""

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
    """Normalised EM (Graph-CoT's in-loop CORRECT/INCORRECT)."""
    return normalize_answer(prediction) == normalize_answer(gold)


def original_text(answer: Any) -> str:
    """An answer as Graph-CoT's eval.py sees it: None is '', anything else its ``str()``."""
    return "" if answer is None else str(answer)


def exact_match_strict(prediction: Any, gold: Any) -> bool:
    """Exact string equality, as eval.py's HF ``exact_match`` with default settings."""
    return original_text(prediction) == original_text(gold)


def bootstrap_median(values: Sequence[float], samples: int = 1000, seed: int = 0) -> float:
    """The median over ``samples`` bootstrap resamples of the mean (HF evaluate's ROUGE
    aggregation, rouge-score's BootstrapAggregator 'mid'); seeded, where the original is not."""
    import numpy as np

    data = np.asarray(list(values), dtype=np.float64)
    if data.size == 0:
        return 0.0
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(samples, data.size))].mean(axis=1)
    return float(np.percentile(means, 50))


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


JUDGE_RULES = ("original", "lenient")


@lru_cache(maxsize=1)
def original_judge_prompt() -> JudgePrompt:
    """Graph-CoT eval.py's GPT4score prompt, word for word (package data, for comparability)."""
    text = resources.files("glmcot.eval").joinpath("prompts/judge_original.txt").read_text(encoding="utf-8")
    system, _, user = text.partition("\n---\n")
    return JudgePrompt(system=system.strip(), user=user.rstrip("\n"))


def render_original_judge(question: str, prediction: Any, gold: Any) -> tuple[str, str]:
    prompt = original_judge_prompt()
    values = {"question": original_text(question), "prediction": original_text(prediction), "gold": original_text(gold)}
    # one pass, so braces inside an answer are never filled again
    user = re.sub(r"\{(question|prediction|gold)\}", lambda match: values[match.group(1)], prompt.user)
    return prompt.system, user


def parse_original_judge(reply: str) -> bool:
    """GPT4score's rule: exactly "Yes" is 1; anything else is 0 (never left out, never a hang).
    Surrounding whitespace is dropped: an API chat reply has none, a completions reply may."""
    return (reply or "").strip() == "Yes"


def judge(backend: Any, question: str, prediction: Any, gold: Any, qid: str | None = None,
          rule: str = "original") -> tuple[bool | None, str]:
    """Asks a judge backend (glmcot.llm) whether the prediction is right. Returns (verdict, raw
    reply); with the ``lenient`` rule an unreadable reply gives None."""
    from glmcot.llm import LLMRequest, Segment

    if rule not in JUDGE_RULES:
        raise ValueError(f"unknown judge rule {rule!r}; expected one of {', '.join(JUDGE_RULES)}")
    if rule == "original":
        system, user = render_original_judge(question, prediction, gold)
        # eval.py: temperature 0.01, top_p 1.0, no stop; a longer reply than one word scores 0
        options = {"max_tokens": 16, "temperature": 0.01, "top_p": 1.0, "stop": []}
    else:
        system, user = render_judge(question, prediction, gold)
        options = {"max_tokens": 4, "temperature": 0.0, "stop": ["\n"]}
    separator = "\n\n" if rule == "original" else ""  # the original sends two chat messages
    request = LLMRequest(
        segments=[Segment(text=system + separator, level=1, key=None), Segment(text=user, level=4, key=None)],
        metadata={"qid": qid, "agent": "judge", "step": 0, "attempt": 0}, **options,
    )
    response = backend.complete(request)
    verdict = parse_original_judge(response.text) if rule == "original" else parse_judge_reply(response.text)
    return verdict, response.text
