"""glmcot.benchmarks.common: what every benchmark's output shares, in one place."""

from __future__ import annotations

import sys

from glmcot.benchmarks import common


def test_percentile_is_a_value_that_occurred_by_nearest_rank():
    assert common.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert common.percentile([1.0, 2.0], 99) == 2.0 and common.percentile([1.0, 2.0], 0) == 1.0
    assert common.percentile([], 50) is None


def test_signed_marks_an_effect_that_was_not_measured():
    assert [common.signed(v) for v in (1.26, -0.04, None)] == ["+1.3", "-0.0", "n/a"]


def test_the_header_names_a_package_run_with_python_m_after_its_folder(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/site/glmcot/benchmarks/codesign/__main__.py", "--quick"])
    assert common.run_header(None)["command"] == "codesign.py --quick"
    monkeypatch.setattr(sys, "argv", ["/site/glmcot/benchmarks/serve.py"])
    header = common.run_header(["--rates", "1"])
    assert header["command"] == "serve.py --rates 1" and header["date"]
    assert set(header["machine"]) == {"platform", "cpus", "python"}
