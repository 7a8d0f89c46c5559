"""The glmcot-mini checkpoint folder (Hugging Face layout) and where it lives by default.

    config.json  model.safetensors  generation_config.json      (transformers' save_pretrained)
    tokenizer.json  tokenizer_config.json  chat_template.jinja  (a byte-level BPE trained on the examples)
    training.json  loss.png  train_log.json                     (how it was made)

The default location is <cache dir>/models/glmcot-mini (GLMCOT_CACHE_DIR, else ~/.cache/glmcot);
`--model glmcot-mini` resolves to it when `glmcot train-mini` built one there, else to the
checkpoint shipped with the package (`glmcot/mini/shipped/`), so a fresh install answers at once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from glmcot.mini import MODEL_NAME

BUILD_COMMAND = "glmcot train-mini --preset cpu"
MARKER = "training.json"


def default_path() -> Path:
    from glmcot.engine.models.tokenizer import cache_dir

    return cache_dir() / "models" / MODEL_NAME


def is_mini_checkpoint(path: str | Path) -> bool:
    marker = Path(path) / MARKER
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text(encoding="utf-8")).get("model") == MODEL_NAME
    except (OSError, json.JSONDecodeError):
        return False


def shipped_path() -> Path:
    """The checkpoint shipped inside the package (package data; its training.json says how it was made)."""
    return Path(__file__).resolve().parent / "shipped"


def _complete(path: Path) -> bool:
    return (path / "config.json").is_file() and (path / "model.safetensors").is_file()


def resolve(model: str) -> Path:
    """`glmcot-mini` -> the default folder when `train-mini` built one there, else the shipped
    checkpoint; a path -> itself. A clear error says how to build it."""
    if model == MODEL_NAME:
        path = default_path()
        if not _complete(path) and _complete(shipped_path()):
            return shipped_path()
    else:
        path = Path(model).expanduser()
    if not _complete(path):
        raise FileNotFoundError(f"no glmcot-mini checkpoint at {path}; build it with: {BUILD_COMMAND} --out {path}")
    return path


def train_tokenizer(corpus: str, vocab_size: int, directory: Path):
    """A byte-level BPE on the training texts, saved into `directory` and loaded back."""
    from glmcot.engine.models.tokenizer import _train_bpe, load_tokenizer

    target = directory / "tokenizer"
    _train_bpe(corpus, vocab_size, target)
    return load_tokenizer(target)


def code_version() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def write_checkpoint(out: str | Path, model: Any, tokenizer: Any, training: dict[str, Any], extras: dict[str, Path] | None = None) -> Path:
    """Writes the folder next to `out` and renames it into place (a crash leaves the old one)."""
    from glmcot.engine.models.tokenizer import package_data, CHATML_FILE

    out = Path(out).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        eos = tokenizer.token_to_id("<|endoftext|>")
        model.generation_config.eos_token_id = eos
        model.generation_config.pad_token_id = eos
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save(staging)
        (staging / "chat_template.jinja").write_text(package_data(CHATML_FILE), encoding="utf-8")
        for name, source in (extras or {}).items():
            shutil.copyfile(source, staging / name)
        record = {"model": MODEL_NAME, **training,
                  "size_bytes": sum(p.stat().st_size for p in staging.iterdir() if p.is_file())}
        (staging / MARKER).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out, old)
            os.replace(staging, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out
