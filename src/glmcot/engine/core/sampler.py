"""Token sampling: greedy, temperature, top-k, top-p, with an optional per-request seed."""

from __future__ import annotations

import torch

from glmcot.engine.core.request import Request


def sample(logits: torch.Tensor, requests: list[Request]) -> list[int]:
    """logits: [len(requests), vocab] float32."""
    greedy = logits.argmax(dim=-1).tolist()
    out = []
    for row, request in enumerate(requests):
        params = request.sampling
        if params.greedy:
            out.append(greedy[row])
            continue
        scores = logits[row] / params.temperature
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
        out.append(int(torch.multinomial(probs, 1, generator=request.generator).item()))
    return out
