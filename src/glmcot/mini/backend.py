"""glmcot-mini served: the native engine behind
compact prompts. The checkpoint itself is standard; only the prompts it was trained on are its own."""

from __future__ import annotations

from typing import Any

from glmcot.mini import MODEL_NAME


def wants_mini(model: str) -> bool:
    from glmcot.mini.checkpoint import is_mini_checkpoint

    return model == MODEL_NAME or is_mini_checkpoint(model)


def mini_backend(model: str = MODEL_NAME, **options: Any):
    """A CompactBackend over a NativeBackend on the resolved checkpoint (FileNotFoundError with the
    build command when it is absent)."""
    from glmcot.llm.native import NativeBackend
    from glmcot.mini.checkpoint import resolve
    from glmcot.mini.compact import CompactBackend

    path = resolve(model)
    for unused in ("questions", "code_runner", "counter"):
        options.pop(unused, None)
    native = NativeBackend(model=str(path), **options)
    native.label = f"native {MODEL_NAME}"
    return CompactBackend(native)
