import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """The tiny preset end to end: graphs, examples, tokenizer, a few steps, the checkpoint."""
    from glmcot.mini.config import preset
    from glmcot.mini.pipeline import build

    root = tmp_path_factory.mktemp("mini")
    config = preset("tiny", max_steps=8, epochs=2)
    record = build(config, root / "ckpt", root / "work", preset_name="tiny", say=lambda line: None, command="test")
    return root, record
