"""Fidelity of position-independent chunk reuse (pic, pic0) against full prefill on the same prompts.

Top-1 agreement and KL of the next-token distributions, teacher-forced along the same completion.
Random weights cannot tell fidelity for a real model: the caveat says so in every such result.
"""

from __future__ import annotations

import argparse
import statistics

from glmcot.benchmarks.codesign.arms import engine_config
from glmcot.benchmarks.codesign.workload import FORCED_MAX_TOKENS, Call, Session
from glmcot.benchmarks.common import percentile

RANDOM_CAVEAT = ("fidelity on random weights says nothing about a real model: rerun this command with "
                 "--model /path/to/local/checkpoint to measure it")
FIDELITY_MODES = {"pic": ("pic", "context"), "pic0": ("pic0", "context"),
                  "pic isolated": ("pic", "isolated"), "pic0 isolated": ("pic0", "isolated")}


def distributions(engine, calls: list[Call], warm: list[Call]) -> tuple[list[list], int]:
    """Teacher-forced next-token log-probabilities along each call's forced completion, after
    prefill-only runs of `warm` (other sessions' calls: their chunks are then cached, so the
    measured calls reuse chunks first computed elsewhere, as under load)."""
    import torch
    from glmcot.engine import SamplingParams

    for call in warm:
        engine.add_request(call.segments, SamplingParams(max_tokens=0))
    while engine.has_unfinished():
        engine.step()
    hits_before = engine.stats()["chunk_hits_tokens"]
    captured: dict[str, list] = {}
    execute = engine.runner.execute

    def recording(scheduled, kv):
        logits, sampled = execute(scheduled, kv)
        for row, request in enumerate(sampled):
            if not request.is_chunk_job:
                captured.setdefault(request.request_id, []).append(torch.log_softmax(logits[row].float(), -1).cpu())
        return logits, sampled

    engine.runner.execute = recording
    ids = [engine.add_request(c.segments, SamplingParams(forced_text=c.forced, max_tokens=FORCED_MAX_TOKENS)).request_id for c in calls]
    while engine.has_unfinished():
        engine.step()
    engine.runner.execute = execute
    return [captured[i] for i in ids], engine.stats()["chunk_hits_tokens"] - hits_before


def fidelity(args, sessions: list[Session]) -> dict:
    import torch
    from glmcot.engine.core.llm_engine import LLMEngine

    # The measured calls: the last R-Agent call of the last sessions (the longest notebooks);
    # every other session's calls warm the cache first.
    targets = [s for s in reversed(sessions) if any(seg.key for seg in s.calls[-1].segments)][: args.fidelity_prompts]
    calls = [s.calls[-1] for s in targets]
    warm = [c for s in sessions if s not in targets for c in s.calls]
    big = dict(vars(args))
    big["kv_tokens"] = None  # no memory pressure: only the reuse mode differs
    reference, _ = distributions(LLMEngine(engine_config(argparse.Namespace(**big), chunk_reuse="exact")), calls, [])
    out = {"prompts": len(calls), "warm_calls": len(warm),
           "caveat": RANDOM_CAVEAT if args.model.startswith("random:") else None}
    for mode, (reuse, source) in FIDELITY_MODES.items():
        engine = LLMEngine(engine_config(argparse.Namespace(**big), chunk_reuse=reuse, chunk_source=source))
        got, chunk_hits = distributions(engine, calls, warm)
        agree = first_agree = steps = 0
        kls = []
        for want_steps, got_steps in zip(reference, got):
            for j, (p, q) in enumerate(zip(want_steps, got_steps)):
                same = int(p.argmax() == q.argmax())
                agree += same
                first_agree += same if j == 0 else 0
                steps += 1
                kls.append(float(torch.sum(p.exp() * (p - q))))
        out[mode] = {"top1_agreement": agree / steps, "first_token_agreement": first_agree / len(calls),
                     "kl_mean": statistics.fmean(kls), "kl_p99": percentile(kls, 99), "steps": steps,
                     "chunk_hit_tokens": chunk_hits}
    return out
