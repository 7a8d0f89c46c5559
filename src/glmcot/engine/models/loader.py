"""Build a model and tokenizer from a local checkpoint directory or a `random:` spec."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from glmcot.engine.models.config import ModelConfig
from glmcot.engine.models.decoder import DecoderModel
from glmcot.engine.models.random_models import parse_spec, random_hf_config, random_weights, uses_qwen_tokenizer
from glmcot.engine.models.tokenizer import SPECIAL_TOKENS, Tokenizer, load_tokenizer, qwen_tokenizer, trained_bpe_tokenizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class LoadedModel:
    model: DecoderModel
    config: ModelConfig
    tokenizer: Tokenizer
    hf_config: dict


def load_model_description(spec: str, tokenizer_dir: str | None = None) -> tuple[ModelConfig, Tokenizer, dict]:
    """The model's configuration, tokenizer and Hugging Face config, without its weights (cheap: a
    process that only tokenises, such as ProcessEngine's parent, needs no more)."""
    if spec.startswith("random:"):
        family, size = parse_spec(spec)
        tokenizer = qwen_tokenizer() if uses_qwen_tokenizer(size) else trained_bpe_tokenizer()
        eos = [tokenizer.token_to_id(t) for t in (SPECIAL_TOKENS[0], SPECIAL_TOKENS[2])]
        hf = random_hf_config(family, size, eos)
    else:
        directory = Path(spec)
        if not (directory / "config.json").is_file():
            raise FileNotFoundError(f"{spec!r} is neither a random:<family>:<size> spec nor a checkpoint directory with config.json")
        hf = json.loads((directory / "config.json").read_text())
        tokenizer = None
    config = ModelConfig.from_hf(hf)
    if tokenizer is None or tokenizer_dir:
        tokenizer = load_tokenizer(tokenizer_dir or spec, config.eos_token_ids)
    if tokenizer.vocab_size > config.vocab_size:
        raise ValueError(f"tokenizer has {tokenizer.vocab_size} ids but the model's vocab_size is {config.vocab_size}")
    return config, tokenizer, hf


def load_model(spec: str, dtype: str, device: str, max_positions: int, seed: int = 0,
               tokenizer_dir: str | None = None) -> LoadedModel:
    files = [] if spec.startswith("random:") else sorted(Path(spec).glob("*.safetensors"))
    if not files and (Path(spec) / "config.json").is_file():   # missing weights are named before a bad config
        raise FileNotFoundError(f"{spec} has no *.safetensors weights")
    config, tokenizer, hf = load_model_description(spec, tokenizer_dir)
    weights: Iterable = _safetensors(files) if files else random_weights(hf, seed)
    positions = min(max_positions, config.max_position_embeddings)
    with torch.device("meta"):
        model = DecoderModel(config, positions)
    model = model.to_empty(device=device).to(DTYPES[dtype])
    model.rotary.build(device)
    model.load_weights(weights)
    if torch.device(device).type == "cpu":
        model.prepare_for_cpu()
    model.eval()
    return LoadedModel(model, config, tokenizer, hf)


def _safetensors(files: list[Path]) -> Iterator[tuple[str, torch.Tensor]]:
    from safetensors import safe_open

    for path in files:
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():
                yield name, f.get_tensor(name)
