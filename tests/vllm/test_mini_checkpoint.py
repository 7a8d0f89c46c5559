"""glmcot-mini's checkpoint is a standard one: `vllm serve` loads the folder `glmcot train-mini`
writes, and its greedy continuations of held-out agent prompts equal transformers' token for token.
(The main suite checks the native engine against transformers on the same kind of checkpoint.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.vllm.conftest import glmcot_cli, needs_vllm, vllm_server

needs_vllm()

NEW_TOKENS = 24


@pytest.fixture(scope="module")
def mini(tmp_path_factory) -> Path:
    """The tiny preset (one pass over its data)."""
    root = tmp_path_factory.mktemp("mini")
    code, output = glmcot_cli(["train-mini", "--preset", "tiny", "--out", str(root / "ckpt"),
                               "--work-dir", str(root / "work")], {})
    assert code == 0, output
    return root


def held_out_prompts(root: Path, count: int = 6) -> list[list[int]]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(root / "ckpt" / "tokenizer.json"))
    prompts = []
    for line in (root / "work" / "eval.jsonl").read_text(encoding="utf-8").splitlines():
        example = json.loads(line)
        ids: list[int] = []
        for position, text in enumerate(example["segments"]):  # segment by segment, as in training
            ids.extend(tokenizer.encode(text, add_special_tokens=position == 0).ids)
        if len(ids) + NEW_TOKENS <= 512:
            prompts.append(ids)
        if len(prompts) == count:
            break
    assert len(prompts) == count, "the tiny preset's held-out seed gave too few short prompts"
    return prompts


def transformers_greedy(checkpoint: Path, prompts: list[list[int]]) -> list[list[int]]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(checkpoint), torch_dtype=torch.float32).eval()
    eos = model.config.eos_token_id
    out = []
    with torch.no_grad():
        for ids in prompts:
            generated = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=eos,
                                       pad_token_id=eos)[0, len(ids):].tolist()
            out.append(until_eos(generated, eos))
    return out


def until_eos(tokens: list[int], eos: int) -> list[int]:
    return tokens[: tokens.index(eos)] if eos in tokens else tokens


def test_vllm_serve_loads_the_checkpoint_and_decodes_like_transformers(mini, tmp_path):
    import httpx

    checkpoint = mini / "ckpt"
    record = json.loads((checkpoint / "training.json").read_text())
    assert record["steps"] >= 1 and "trained on synthetic data" in record["label"]
    prompts = held_out_prompts(mini)
    expected = transformers_greedy(checkpoint, prompts)
    eos = json.loads((checkpoint / "config.json").read_text())["eos_token_id"]
    assert any(expected), "the model wrote nothing on any prompt: nothing would be compared"
    with vllm_server(checkpoint, tmp_path, mode="off", blocks=64, max_model_len=1024) as (url, _):
        for ids, tokens in zip(prompts, expected):
            reply = httpx.post(url + "/v1/completions", timeout=120, json={
                "model": "tiny", "prompt": ids, "max_tokens": NEW_TOKENS, "temperature": 0.0,
                "return_token_ids": True, "skip_special_tokens": False})
            assert reply.status_code == 200, reply.text
            choice = reply.json()["choices"][0]
            assert until_eos(choice["token_ids"], eos) == tokens, (choice, tokens)
