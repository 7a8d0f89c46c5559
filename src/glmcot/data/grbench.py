"""Loader for GRBench question files (JSON Lines `{qid, question, answer}`, optional `level`).

GRBench keeps template order, ten instances each, so `qid // 10` is the template block; the block
table (resources/grbench_blocks.json, from grbench.md §4) gives its name and level.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from glmcot.data.questions import LEVELS, QuestionFormatError, QuestionRecord
from glmcot.data.schemas import UnknownDomainError, canonical_domain

# Hugging Face file names of the GRBench copy, besides our domain codes and GLM aliases.
_FILE_ALIASES = {"computer_science": "dblp", "cs": "dblp", "data": None}


@dataclass(frozen=True)
class Block:
    template: str
    level: str
    name: str


@lru_cache(maxsize=None)
def block_table() -> dict[str, dict[int, Block]]:
    path = resources.files("glmcot.data").joinpath("resources", "grbench_blocks.json")
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {domain: {int(k): Block(f"{domain}/{k}", v["level"], v["name"]) for k, v in blocks.items()}
            for domain, blocks in raw.items()}


def block_of(domain: str, qid: str | int) -> Block:
    domain = canonical_domain(domain)
    try:
        number = int(str(qid).strip())
    except ValueError:
        raise QuestionFormatError(f"{domain}: qid {qid!r} is not a GRBench integer qid") from None
    blocks = block_table()[domain]
    block = blocks.get(number // 10)
    if number < 0 or block is None:
        raise QuestionFormatError(
            f"{domain}: qid {qid} falls in block {number // 10}, but GRBench {domain} has blocks "
            f"0-{max(blocks)} ({len(blocks) * 10} questions)")
    return block


def domain_from_path(path: Path) -> str:
    stem = path.stem.lower()
    if stem in _FILE_ALIASES and _FILE_ALIASES[stem]:
        return _FILE_ALIASES[stem]
    candidates = [stem, path.parent.name.lower()]   # data/processed_data/<domain>/data.json
    for name in candidates:
        try:
            return canonical_domain(_FILE_ALIASES.get(name) or name)
        except UnknownDomainError:
            continue
    raise UnknownDomainError(
        f"cannot tell the domain of {path} from its name; pass --domain (dblp, amazon, goodreads, "
        "biomedical, legal)")


def load_grbench(path: str | os.PathLike, domain: str | None = None) -> list[QuestionRecord]:
    """Read one GRBench question file and assign template and level to every question.

    A `level` field in the file wins over the table (the Hugging Face copy carries one)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    domain = canonical_domain(domain) if domain else domain_from_path(path)
    records = []
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    rows = _rows(text, path)
    seen: set[str] = set()
    for where, raw in rows:
        missing = [k for k in ("qid", "question", "answer") if k not in raw]
        if missing:
            raise QuestionFormatError(f"{where}: missing field(s) {', '.join(missing)}")
        qid = str(raw["qid"]).strip()
        if qid in seen:
            raise QuestionFormatError(f"{where}: duplicate qid {qid}")
        seen.add(qid)
        block = block_of(domain, qid)
        level = str(raw.get("level") or block.level).strip().lower()
        if level not in LEVELS:
            raise QuestionFormatError(f"{where}: level {level!r} is not one of {', '.join(LEVELS)}")
        records.append(QuestionRecord(
            qid=f"{domain}-{qid}", domain=domain, template=block.template, params={},
            level=level, question=str(raw["question"]), answer=str(raw["answer"]),
            deterministic=block.template in DETERMINISTIC, plan=None))
    return records


def _rows(text: str, path: Path) -> list[tuple[str, dict]]:
    stripped = text.lstrip()
    if stripped.startswith("["):     # a JSON array of rows is accepted too
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise QuestionFormatError(f"{path}: not valid JSON ({exc.msg})") from None
        return [(f"{path}[{k}]", _object(row, f"{path}[{k}]")) for k, row in enumerate(data)]
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            rows.append((where, _object(json.loads(line), where)))
        except json.JSONDecodeError as exc:
            raise QuestionFormatError(f"{where}: not valid JSON ({exc.msg})") from None
    return rows


def _object(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise QuestionFormatError(f"{where}: expected a JSON object with qid, question, answer")
    return value


# Single-hop lookups a classifier should call deterministic (one snippet, no reasoning loop);
# they match the synthetic templates' flag.
DETERMINISTIC = frozenset(
    [f"dblp/{k}" for k in (0, 1, 2, 8, 9, 11)]
    + [f"amazon/{k}" for k in range(8)]
    + [f"goodreads/{k}" for k in (0, 1, 2, 3, 4, 5, 6, 7, 8, 13, 14, 15, 16)]
    + [f"biomedical/{k}" for k in (0, 1, 2, 3, 4, 5, 6, 14, 15, 16)]
    + [f"legal/{k}" for k in (0, 1, 2, 3, 4, 8, 9, 12)])
