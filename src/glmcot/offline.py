"""Hub libraries at the entry points: every entry point (the CLI, each benchmark, the test suite)
calls `stay_offline()` before anything imports huggingface_hub or transformers, which read these
variables once. No downloads at run time, and no 'Loading weights' bars over glmcot's own output."""

from __future__ import annotations

import os


def stay_offline() -> None:
    """Local files only, and quiet model loading (a user's own setting of any of these wins)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # its fork warning under the sandbox's workers
