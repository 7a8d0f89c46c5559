"""Word lists (package data, resources/words/*.txt) the synthetic generators draw texts from."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def words(name: str) -> tuple[str, ...]:
    """One entry per non-empty line of resources/words/<name>.txt, in file order."""
    path = resources.files("glmcot.data").joinpath("resources", "words", f"{name}.txt")
    return tuple(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


@lru_cache(maxsize=None)
def pairs(name: str) -> tuple[tuple[str, ...], ...]:
    """Entries of a word list split on '|'."""
    return tuple(tuple(part.strip() for part in line.split("|")) for line in words(name))
