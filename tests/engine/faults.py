"""Faults injected into one request's sampling or detokenising: seed 666 fails in sampling, a
"BOOM" stop string in detokenising. Shared by the thread engine's and the process engine's tests."""

from __future__ import annotations

from collections.abc import Callable


def exploding_parts() -> tuple[Callable, Callable]:
    """(sample_row, TextStream.add_token) replacements that fail only on the marked requests."""
    from glmcot.engine.core import detokenizer, sampler

    real_row, real_add = sampler.sample_row, detokenizer.TextStream.add_token

    def row(logits, greedy, request):
        if request.sampling.seed == 666:
            raise RuntimeError("sampler exploded")
        return real_row(logits, greedy, request)

    def add_token(self, token_id):
        if "BOOM" in self.stop:
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "detokeniser exploded")
        return real_add(self, token_id)

    return row, add_token
