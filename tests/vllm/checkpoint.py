"""The tiny random Qwen3 checkpoint the vLLM tests serve (built by glmcot.benchmarks.tiny_checkpoint)."""

from glmcot.benchmarks.tiny_checkpoint import tiny_qwen3

__all__ = ["tiny_qwen3"]
