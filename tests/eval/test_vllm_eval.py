"""The vLLM eval benchmark's bookkeeping (no server): turns pool per arm, ratios are to `off`."""

from __future__ import annotations

from types import SimpleNamespace

from glmcot.benchmarks import vllm_eval


def run(arm: str, computed: int, hits: int, wall: float, evictions=None) -> dict:
    return {"arm": arm, "wall_s": wall, "prefix_queries": computed + hits, "prefix_hits": hits,
            "computed_tokens": computed, "questions": 10, "backend_errors": 1, "exact_answers": 9, "llm_calls": 30,
            "evictions": evictions}


def test_turns_pool_per_arm_and_off_has_no_eviction_counts():
    runs = [run("enforce", 90, 110, 10.0, {"p1": 1, "p2": 2, "p3": 0, "p4": 5}),
            run("enforce", 80, 120, 12.0, {"p1": 0, "p2": 1, "p3": 3, "p4": 4}),
            run("off", 100, 100, 11.0), run("off", 100, 100, 11.0)]
    enforce, off = vllm_eval.pooled(runs, "enforce"), vllm_eval.pooled(runs, "off")
    assert enforce["computed_tokens"] == 170 and enforce["questions"] == 20 and enforce["exact_answers"] == 18
    assert enforce["evictions"] == {"p1": 1, "p2": 3, "p3": 3, "p4": 9}
    assert enforce["hit_rate"] == 230 / 400
    assert off["evictions"] is None  # no plugin: not counted, never shown as zero


def test_ratios_are_to_off_for_each_arm_run(monkeypatch):
    results = iter([run("enforce", 90, 110, 10.0, {"p1": 0}), run("observe", 100, 100, 9.0, {"p1": 2}),
                    run("off", 100, 100, 10.0)])
    monkeypatch.setattr(vllm_eval, "run_arm", lambda *args: next(results))
    args = SimpleNamespace(repeats=1, arms=["enforce", "observe", "off"], limit=10)
    point = vllm_eval.one_pool(args, 4096, None, None, None)
    assert point["ratios"]["enforce/off"]["prompt tokens computed"] == 0.9
    assert point["ratios"]["observe/off"]["wall time"] == 0.9
    assert set(point["ratios"]) == {"enforce/off", "observe/off"}
    assert vllm_eval.ratio(1, 0) is None
