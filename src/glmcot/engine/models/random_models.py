"""`random:<family>:<size>` model specs: real architectures with seeded random weights.

Tiny and small shapes use a byte-level BPE trained locally (fast decode, vocab ~1.3k); the
0.6b/8b shapes use the real Qwen BPE (vocab 151,936) so token counts match real models.
`tiny-qwen-vocab` is the tiny shape with the Qwen BPE and long positions: cache studies count
real Qwen tokens at a small fraction of the 0.6b model's compute.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

FAMILIES = ("qwen2", "qwen3", "llama")

SHAPES: dict[str, dict] = {
    "tiny": dict(hidden_size=128, intermediate_size=352, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, max_position_embeddings=4096, rope_theta=10000.0),
    "small": dict(hidden_size=256, intermediate_size=704, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=64, max_position_embeddings=8192, rope_theta=10000.0),
    "tiny-qwen-vocab": dict(hidden_size=128, intermediate_size=352, num_hidden_layers=4, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=32, max_position_embeddings=40960, rope_theta=1000000.0),
    # Qwen3-0.6B and Qwen3-8B shapes.
    "0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, max_position_embeddings=40960, rope_theta=1000000.0,
                 tie_word_embeddings=True),
    "8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
               num_key_value_heads=8, head_dim=128, max_position_embeddings=40960, rope_theta=1000000.0,
               tie_word_embeddings=False),
}
SMALL_VOCAB = 1280  # covers the trained BPE (1,243 ids)
QWEN_VOCAB = 151936


def parse_spec(spec: str) -> tuple[str, str]:
    parts = spec.split(":")
    if len(parts) != 3 or parts[0] != "random" or parts[1] not in FAMILIES or parts[2] not in SHAPES:
        raise ValueError(f"bad model spec {spec!r}: expected random:<{'|'.join(FAMILIES)}>:<{'|'.join(SHAPES)}>")
    return parts[1], parts[2]


def uses_qwen_tokenizer(size: str) -> bool:
    return size in ("tiny-qwen-vocab", "0.6b", "8b")


def random_hf_config(family: str, size: str, eos_token_ids: list[int]) -> dict:
    """A Hugging Face config.json dict for this family and shape."""
    shape = dict(SHAPES[size])
    theta = shape.pop("rope_theta")
    cfg = {
        "model_type": family,
        "architectures": [{"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM"}[family]],
        "vocab_size": QWEN_VOCAB if uses_qwen_tokenizer(size) else SMALL_VOCAB,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "tie_word_embeddings": family != "llama",
        "attention_bias": False,
        "eos_token_id": eos_token_ids,
        "rope_parameters": {"rope_type": "default", "rope_theta": theta},
        **shape,
    }
    if family == "llama":
        # Exercise Llama-3 style scaling in tests and benchmarks.
        cfg["rope_parameters"] = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 1024}
    return cfg


def random_weights(cfg: dict, seed: int, dtype: torch.dtype = torch.float32) -> Iterator[tuple[str, torch.Tensor]]:
    """Hugging Face-named tensors, N(0, 0.02) matrices and biases, unit norms; deterministic in seed."""
    gen = torch.Generator().manual_seed(seed)
    hidden, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    family = cfg["model_type"]
    qkv_bias = family == "qwen2" or cfg.get("attention_bias", False)
    o_bias = family != "qwen2" and cfg.get("attention_bias", False)

    def normal(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * 0.02).to(dtype)

    yield "model.embed_tokens.weight", normal(vocab, hidden)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", torch.ones(hidden, dtype=dtype)
        yield p + "post_attention_layernorm.weight", torch.ones(hidden, dtype=dtype)
        for name, rows in (("q", heads * hd), ("k", kv * hd), ("v", kv * hd)):
            yield p + f"self_attn.{name}_proj.weight", normal(rows, hidden)
            if qkv_bias:
                yield p + f"self_attn.{name}_proj.bias", normal(rows)
        yield p + "self_attn.o_proj.weight", normal(hidden, heads * hd)
        if o_bias:
            yield p + "self_attn.o_proj.bias", normal(hidden)
        if family == "qwen3":
            yield p + "self_attn.q_norm.weight", torch.ones(hd, dtype=dtype)
            yield p + "self_attn.k_norm.weight", torch.ones(hd, dtype=dtype)
        yield p + "mlp.gate_proj.weight", normal(inter, hidden)
        yield p + "mlp.up_proj.weight", normal(inter, hidden)
        yield p + "mlp.down_proj.weight", normal(hidden, inter)
    yield "model.norm.weight", torch.ones(hidden, dtype=dtype)
    if not cfg["tie_word_embeddings"]:
        yield "lm_head.weight", normal(vocab, hidden)


def transformers_model(spec: str, seed: int = 0, dtype: torch.dtype = torch.float32, device: str = "cpu",
                       eos_token_ids: list[int] | None = None):
    """The same seeded random weights in transformers' own model class: the reference the engine
    benchmarks compare against. Raises if a weight does not fit."""
    from transformers import AutoConfig, AutoModelForCausalLM

    hf = random_hf_config(*parse_spec(spec), eos_token_ids or [0])
    config = AutoConfig.for_model(**{k: v for k, v in hf.items() if k != "architectures"})
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    missing, unexpected = model.load_state_dict(dict(random_weights(hf, seed, dtype)), strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise RuntimeError(f"weights do not fit the transformers model: {missing} {unexpected}")
    model.tie_weights()
    return model.eval()
