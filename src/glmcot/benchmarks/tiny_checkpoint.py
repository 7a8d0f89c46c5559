"""A tiny random Qwen3 checkpoint for a real vLLM engine (no downloads; the vLLM tests and
vllm_codesign use it): 2 layers, hidden 128,
head size 64, 4096 positions, the project's trained byte-level BPE (vocabulary 2048)."""

from __future__ import annotations

from pathlib import Path


def tiny_qwen3(directory: str | Path) -> Path:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from glmcot.engine.models.tokenizer import trained_bpe_tokenizer

    directory = Path(directory)
    if (directory / "config.json").is_file():
        return directory
    tokenizer = trained_bpe_tokenizer()
    config = Qwen3Config(vocab_size=2048, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=4096,
                         rms_norm_eps=1e-6, eos_token_id=0, pad_token_id=0, bos_token_id=None, tie_word_embeddings=True,
                         torch_dtype="float32")
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).eval().save_pretrained(directory)
    tokenizer.save(directory)
    return directory
