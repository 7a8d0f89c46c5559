"""glmcot.benchmarks.codesign_repeats pools the same-run repeats of several codesign.py results by
setting, pairs old results again from their runs, and rejects files it cannot use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture()
def repeats():
    from glmcot.benchmarks import codesign_repeats

    return codesign_repeats


PAPER = {"priority_miss_pct": -15.1, "priority_throughput_pct": 14.3}


def result(pool: int, per_repeat: list[float] | None = None, runs: dict | None = None, version: int = 4) -> dict:
    out = {"benchmark": "codesign", "version": version, "date": "2026-11-30T00:00:00+00:00", "command": "codesign.py",
           "settings": {"model": "random:qwen3:0.6b", "concurrency": 36, "kv_tokens": pool, "sessions": 90},
           "paper": PAPER, "ours_wall": {"throughput_key": "throughput_sessions_per_s"}}
    if per_repeat is not None:
        out["ours_wall_per_repeat"] = {"priority_throughput_pct": per_repeat, "priority_miss_pct": [-22.6] * len(per_repeat)}
    if runs is not None:
        out["all_runs"] = runs
    return out


def arm(throughput: float, hit_rate: float) -> dict:
    return {"throughput_sessions_per_s": throughput, "hit_rate": hit_rate}


def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_repeats_are_pooled_by_setting_and_old_results_paired_from_their_runs(tmp_path, repeats):
    first = write(tmp_path / "a.json", result(20480, [16.0, 12.0]))
    second = write(tmp_path / "b.json", result(20480, [17.0]))
    # a format-3 result: no per-repeat effects, two repeats of two arms in all_runs
    old = write(tmp_path / "c.json", result(24576, runs={
        "lru+chunks": [arm(1.0, 0.8), arm(1.0, 0.8)], "glm+chunks": [arm(1.10, 0.85), arm(1.20, 0.85)]}, version=3))
    out = tmp_path / "summary.json"
    assert repeats.main([str(first), str(second), str(old), "--out", str(out)]) == 0
    summary = json.loads(out.read_text())
    tight, loose = summary["settings"]
    assert tight["setting"] == "36 in flight, 20,480-token pool" and len(tight["runs"]) == 2
    assert tight["repeats"] == [16.0, 12.0, 17.0] and tight["median"] == 16.0
    assert tight["paper"] == 14.3 and tight["beat_paper"] == 2
    assert loose["repeats"] == pytest.approx([10.0, 20.0]) and loose["beat_paper"] == 1
    assert summary["label"].startswith("forced decoding") and Path(summary["plot"]).is_file()

    misses = tmp_path / "misses.json"
    assert repeats.main([str(first), "--effect", "priority_miss_pct", "--out", str(misses)]) == 0
    row = json.loads(misses.read_text())["settings"][0]
    assert row["paper"] == -15.1 and row["beat_paper"] == 2  # fewer misses is better


def test_unusable_files_get_clear_errors(tmp_path, repeats, capsys):
    good = write(tmp_path / "good.json", result(20480, [16.0]))
    cases = [
        (write(tmp_path / "broken.json", '{"benchmark": "codesign", '), "not a readable JSON file"),
        (write(tmp_path / "other.json", {"benchmark": "engine"}), "not a codesign.py result"),
        (write(tmp_path / "bare.json", result(20480, version=3)), "has no per-repeat runs"),
    ]
    for path, message in cases:
        assert repeats.main([str(good), str(path), "--out", str(tmp_path / "x.json")]) == 2
        assert message in capsys.readouterr().err
    assert repeats.main([str(good), "--effect", "nonsense", "--out", str(tmp_path / "x.json")]) == 2
    assert "no per-repeat figures for 'nonsense' (it has: priority_miss_pct, priority_throughput_pct)" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
