"""The install pins are consistent: a fresh machine can resolve them (CI installs under constraints.txt)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pins() -> list[tuple[str, str]]:
    pins = []
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt pins exactly, got {line!r}"
            pins.append((re.sub(r"[-_.]+", "-", name).lower(), version))
    return pins


def test_constraints_pin_each_package_once():
    names = [name for name, _ in _pins()]
    repeated = sorted({name for name in names if names.count(name) > 1})
    assert not repeated, f"constraints.txt pins these more than once, so pip cannot resolve: {repeated}"


def test_exact_pins_in_pyproject_agree_with_constraints():
    pinned = dict(_pins())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    exact = [re.match(r"([A-Za-z0-9_.-]+)==([^;\s]+)$", requirement) for requirement in requirements]
    checked = 0
    for match in filter(None, exact):
        name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
        if name in pinned:
            assert pinned[name] == match.group(2), (name, pinned[name], match.group(2))
            checked += 1
    assert checked >= 5  # transformers, xgrammar, mcp, falkordb, oxigraph at least
