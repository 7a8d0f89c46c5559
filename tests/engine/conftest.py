"""Fixtures: tiny Hugging Face checkpoints (random weights, saved with save_pretrained) and
their transformers reference outputs."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# name: (family, overrides). Odd sizes on purpose: no power-of-two hidden, heads 3/5, kv 1..4.
VARIANTS = {
    "qwen3-tied": ("qwen3", dict(hidden_size=72, intermediate_size=200, num_hidden_layers=2, num_attention_heads=3,
                                 num_key_value_heads=1, head_dim=24, tie_word_embeddings=True)),
    "qwen3-untied": ("qwen3", dict(hidden_size=96, intermediate_size=160, num_hidden_layers=3, num_attention_heads=6,
                                   num_key_value_heads=2, head_dim=16, tie_word_embeddings=False, vocab_size=1283)),
    "qwen2-tied": ("qwen2", dict(hidden_size=80, intermediate_size=136, num_hidden_layers=2, num_attention_heads=5,
                                 num_key_value_heads=1, head_dim=16, tie_word_embeddings=True)),
    "qwen2-untied": ("qwen2", dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                                   num_key_value_heads=2, tie_word_embeddings=False)),
    "llama-untied": ("llama", dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=4, tie_word_embeddings=False, attention_bias=True, mlp_bias=True,
                                   rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                    "original_max_position_embeddings": 64})),
    "llama-tied": ("llama", dict(hidden_size=48, intermediate_size=100, num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, tie_word_embeddings=True)),
}


@pytest.fixture(scope="session")
def tokenizer():
    from glmcot.engine.models.tokenizer import trained_bpe_tokenizer

    return trained_bpe_tokenizer()


def build_checkpoint(name: str, directory, tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    family, overrides = VARIANTS[name]
    config_cls, model_cls = {"qwen3": (Qwen3Config, Qwen3ForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM),
                             "llama": (LlamaConfig, LlamaForCausalLM)}[family]
    kwargs = dict(vocab_size=1280, max_position_embeddings=512, rms_norm_eps=1e-6, initializer_range=0.2,
                  eos_token_id=0, pad_token_id=0, bos_token_id=None)
    kwargs.update(overrides)
    config = config_cls(**kwargs)
    torch.manual_seed(sum(map(ord, name)))
    model = model_cls(config).eval()
    with torch.no_grad():  # non-trivial norms and biases, so loading them is tested too
        for pname, param in model.named_parameters():
            if pname.endswith("norm.weight"):
                param.add_(0.1 * torch.randn_like(param))
            elif pname.endswith("bias"):
                param.copy_(0.05 * torch.randn_like(param))
    model.save_pretrained(directory)
    tokenizer.save(directory)
    return model


class Reference:
    """A checkpoint on disk plus its transformers model; greedy continuations are memoised."""

    def __init__(self, name: str, directory, tokenizer):
        self.name, self.directory = name, str(directory)
        self.model = build_checkpoint(name, directory, tokenizer)
        self._memo: dict = {}

    def greedy(self, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
        import torch

        key = (tuple(prompt_ids), max_new_tokens)
        if key not in self._memo:
            with torch.no_grad():
                out = self.model.generate(torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
                                          max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens, do_sample=False,
                                          eos_token_id=None, pad_token_id=0)
            self._memo[key] = out[0, len(prompt_ids):].tolist()
        return self._memo[key]


@pytest.fixture(scope="session")
def references(tmp_path_factory, tokenizer):
    cache: dict[str, Reference] = {}

    def get(name: str) -> Reference:
        if name not in cache:
            cache[name] = Reference(name, tmp_path_factory.mktemp(name), tokenizer)
        return cache[name]

    return get


PROMPTS = [
    "The knowledge graph holds papers, authors and venues.",
    "Who wrote",
    "def count_neighbours(graph, node_id, relation):\n    total = 0\n    for neighbour in graph.neighbors(node_id, relation):",
    "Question: Which venue published the most papers on graph neural networks? Thought: I need to find the venue nodes first.",
    "café 北京 →",
]


def exploding_parts() -> tuple[Callable, Callable]:
    """(sample_row, TextStream.add_token) replacements that fail only on the marked requests: seed
    666 in sampling, a "BOOM" stop string in detokenising (the thread and process engines' tests)."""
    from glmcot.engine.core import detokenizer, sampler

    real_row, real_add = sampler.sample_row, detokenizer.TextStream.add_token

    def row(logits, greedy, request):
        if request.sampling.seed == 666:
            raise RuntimeError("sampler exploded")
        return real_row(logits, greedy, request)

    def add_token(self, token_id):
        if "BOOM" in self.stop:
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "detokeniser exploded")
        return real_add(self, token_id)

    return row, add_token
