"""The serve-vs-vLLM benchmark's bookkeeping (no servers): warm-up rounds kept apart, medians over
the measured rounds, glmcot/vLLM ratios and the issue's goal."""

from __future__ import annotations

import argparse

from glmcot.benchmarks.serve_vs_vllm import Measurement, build_result, goal_met


def run(server: str, round_: int, throughput: float, p99: float) -> Measurement:
    return Measurement(server=server, point="rate 8", round=round_, seed=round_, completed=48,
                       failed=0, duration_s=6.0, request_throughput=throughput,
                       output_throughput=32 * throughput, median_ttft_ms=p99 / 4,
                       p99_ttft_ms=p99, median_tpot_ms=2.0)


def test_warm_up_round_is_reported_apart_and_ratios_use_the_measured_median():
    args = argparse.Namespace(argv=[], model_path="m", input_len=256, output_len=32,
                              num_prompts=48, request_rates=["8"], max_concurrency=None,
                              rounds=2, seed=0, dtype="float32")
    runs = [run("glmcot", 0, 1.0, 9000.0), run("vllm", 0, 8.0, 100.0),   # a slow first load
            run("glmcot", 1, 8.0, 90.0), run("vllm", 1, 8.0, 100.0),
            run("glmcot", 2, 8.4, 110.0), run("vllm", 2, 8.0, 100.0)]
    result = build_result(args, ["rate 8"], runs, [])
    point = result["points"][0]
    assert point["warmup"]["glmcot"]["p99_ttft_ms"] == 9000.0
    assert point["measured"]["glmcot"]["rounds"] == 2
    assert point["measured"]["glmcot"]["p99_ttft_ms"] == 100.0   # median of 90 and 110
    ratio = point["measured"]["ratio"]
    assert ratio["p99_ttft_ms"] == 1.0 and abs(ratio["request_throughput"] - 1.025) < 1e-9
    assert point["goal_met"] and result["goal_met_points"] == 1 and result["goal_met_median"]


def test_goal_needs_both_the_tail_and_the_throughput():
    assert goal_met({"p99_ttft_ms": 0.9, "request_throughput": 1.0})
    assert not goal_met({"p99_ttft_ms": 1.1, "request_throughput": 1.2})
    assert not goal_met({"p99_ttft_ms": 0.5, "request_throughput": 0.99})
    assert not goal_met({"p99_ttft_ms": None, "request_throughput": 1.0})
