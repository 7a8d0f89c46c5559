"""The serve-vs-vLLM benchmark's bookkeeping (no servers): warm-up rounds kept apart, medians over
the measured rounds, each glmcot server's ratios to vLLM and the issue's goal."""

from __future__ import annotations

import argparse

import pytest

from glmcot.benchmarks.serve_vs_vllm import Measurement, build_result, goal_met, parse_modes


def run(server: str, round_: int, throughput: float, p99: float) -> Measurement:
    return Measurement(server=server, point="rate 8", round=round_, seed=round_, completed=48,
                       failed=0, duration_s=6.0, request_throughput=throughput,
                       output_throughput=32 * throughput, median_ttft_ms=p99 / 4,
                       p99_ttft_ms=p99, median_tpot_ms=2.0)


ARGS = argparse.Namespace(argv=[], model_path="m", input_len=256, output_len=32, num_prompts=48,
                          request_rates=["8"], max_concurrency=None, rounds=2, seed=0, dtype="float32")


def test_warm_up_round_is_reported_apart_and_ratios_use_the_measured_median():
    runs = [run("glmcot-process", 0, 1.0, 9000.0), run("vllm", 0, 8.0, 100.0),   # a slow first load
            run("glmcot-process", 1, 8.0, 90.0), run("vllm", 1, 8.0, 100.0),
            run("glmcot-process", 2, 8.4, 110.0), run("vllm", 2, 8.0, 100.0)]
    result = build_result(ARGS, ["rate 8"], runs, [])
    point = result["points"][0]
    assert result["servers"] == ["glmcot-process", "vllm"]
    assert point["warmup"]["glmcot-process"]["p99_ttft_ms"] == 9000.0
    assert point["measured"]["glmcot-process"]["rounds"] == 2
    assert point["measured"]["glmcot-process"]["p99_ttft_ms"] == 100.0   # median of 90 and 110
    ratio = point["measured"]["ratio"]["glmcot-process"]
    assert ratio["p99_ttft_ms"] == 1.0 and abs(ratio["request_throughput"] - 1.025) < 1e-9
    assert point["goal_met"] == {"glmcot-process": True}
    assert result["goal_met_points"] == {"glmcot-process": 1} and result["goal_met_median"] == {"glmcot-process": True}


def test_each_engine_mode_is_compared_with_the_same_vllm_runs():
    runs = [run(name, round_, throughput, p99) for round_ in (0, 1)
            for name, throughput, p99 in (("glmcot-thread", 8.0, 300.0), ("glmcot-process", 8.0, 50.0),
                                          ("vllm", 8.0, 100.0))]
    result = build_result(argparse.Namespace(**{**vars(ARGS), "rounds": 1}), ["rate 8"], runs, [])
    point = result["points"][0]
    assert result["servers"] == ["glmcot-thread", "glmcot-process", "vllm"]
    assert point["measured"]["ratio"]["glmcot-thread"]["p99_ttft_ms"] == 3.0
    assert point["measured"]["ratio"]["glmcot-process"]["p99_ttft_ms"] == 0.5
    assert point["goal_met"] == {"glmcot-thread": False, "glmcot-process": True}
    assert result["median_ratios"]["glmcot-process"]["p99_ttft_ms"] == 0.5


def test_modes_are_checked():
    assert parse_modes("thread,process") == ["thread", "process"]
    for bad in ("", "thread,thread", "threads"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_modes(bad)


def test_goal_needs_both_the_tail_and_the_throughput():
    assert goal_met({"p99_ttft_ms": 0.9, "request_throughput": 1.0})
    assert not goal_met({"p99_ttft_ms": 1.1, "request_throughput": 1.2})
    assert not goal_met({"p99_ttft_ms": 0.5, "request_throughput": 0.99})
    assert not goal_met({"p99_ttft_ms": None, "request_throughput": 1.0})
