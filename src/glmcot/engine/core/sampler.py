"""Token sampling: greedy, temperature, top-k, top-p, with an optional per-request seed.

Numerically safe for every valid parameter: temperatures below GREEDY_TEMPERATURE are greedy
(dividing by 1e-300 overflows to inf/nan), scores are shifted by their maximum before the
division, and a row whose probabilities still come out non-finite falls back to its argmax.
Each row is sampled on its own, so one request's failure is that request's alone.
"""

from __future__ import annotations

import torch

from glmcot.engine.core.request import Request
from glmcot.engine.outputs import TokenLogprob
from glmcot.engine.sampling_params import GREEDY_TEMPERATURE

__all__ = ["GREEDY_TEMPERATURE", "sample", "sample_row", "token_logprob"]


def token_logprob(logits: torch.Tensor, token: int, top: int) -> TokenLogprob:
    """`token`'s log-probability under the model's distribution (the raw logits: before
    temperature, top-k, top-p, as the OpenAI API reports them) and the `top` likeliest tokens."""
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    best: tuple[tuple[int, float], ...] = ()
    if top > 0:
        values, ids = torch.topk(logprobs, min(top, logprobs.numel()))
        best = tuple(zip(ids.tolist(), values.tolist()))
    return TokenLogprob(int(token), float(logprobs[token]), best)


def sample_row(logits: torch.Tensor, greedy_token: int, request: Request) -> int:
    """One request's next token from its logits row [vocab]."""
    params = request.sampling
    if params.greedy:
        return greedy_token
    # shift first: the scores are <= 0, so dividing by a small temperature cannot overflow
    scores = (logits.float() - logits.max()) / params.temperature
    if params.top_k > 0 and params.top_k < scores.numel():
        kth = torch.topk(scores, params.top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if params.top_p < 1.0:
        sorted_probs, order = probs.sort(descending=True)
        # Drop a token once the mass before it already reaches top_p; the first always stays.
        drop = sorted_probs.cumsum(0) - sorted_probs >= params.top_p
        sorted_probs[drop] = 0.0
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    if not bool(torch.isfinite(probs).all()) or float(probs.sum()) <= 0.0:
        return greedy_token  # e.g. non-finite logits: no distribution to sample from
    return int(torch.multinomial(probs, 1, generator=request.generator).item())


def sample(logits: torch.Tensor, requests: list[Request]) -> list[int | Exception]:
    """logits: [len(requests), vocab] float32. A row that fails yields its exception instead of
    a token, so the caller fails that request alone."""
    greedy = logits.argmax(dim=-1).tolist()
    out: list[int | Exception] = []
    for row, request in enumerate(requests):
        try:
            out.append(sample_row(logits[row], greedy[row], request))
        except Exception as exc:  # noqa: BLE001 - isolated to this request by the caller
            out.append(exc)
    return out
