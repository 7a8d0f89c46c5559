"""EngineConfig: every knob of the engine in one dataclass."""

from __future__ import annotations

import os
from dataclasses import dataclass

from glmcot.engine.cache.policies import POLICIES


@dataclass
class EngineConfig:
    """Engine settings.

    model: a local Hugging Face checkpoint directory, or `random:<family>:<size>`
    (family qwen2 | qwen3 | llama, size tiny | small | 0.6b | 8b) for seeded random weights.
    KV pool size: `kv_cache_tokens` or `kv_cache_bytes` (tokens win when both are set).
    """

    model: str = "random:qwen3:tiny"
    dtype: str = "float32"  # float32 | bfloat16 | float16
    device: str = "cpu"  # cpu | cuda | cuda:N
    seed: int = 0  # random-weight seed (random: specs only)
    block_size: int = 16
    kv_cache_tokens: int | None = None
    kv_cache_bytes: int | None = None
    max_model_len: int | None = None  # defaults to min(config max positions, 8192)
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048  # per-step token budget shared by decode and prefill
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    eviction_policy: str = "lru"  # lru (vLLM's) | glm (four-level priority, LRU inside a level; P3 prefix blocks
    #                               no other session read go first) | glm-paper (the paper's four levels as written)
    p1_cap_fraction: float = 0.25  # glm: share of the pool P1 blocks may hold protected; beyond it they rank as P2
    chunk_reuse: str = "exact"  # exact (prefix caching only) | pic (reuse keyed chunks, recompute their first
    #                             pic_recompute_tokens in context) | pic0 (reuse keyed chunks as they are)
    pic_recompute_tokens: int = 16
    chunk_source: str = "context"  # context: a chunk's KV is taken from the first prompt that computed it, in
    #                                that prompt's context (GLM's Fig. 7, no extra compute) | isolated: computed
    #                                alone by a chunk job (outputs do not depend on what is cached)
    chunk_admission: int = 2  # a missed chunk is indexed the n-th time a prompt holds it outside a prefix hit
    #                           (2: chunks seen once stay out of the pool; 1: at once; see core/chunk_reuse.py)
    num_threads: int | None = None  # torch CPU threads; None = all cores
    keep_large_buffers: bool = True  # CPU: keep freed large buffers in the heap (process-wide, see allocator.py)
    cpu_kernels: bool = True  # CPU: decode attention by the C++ kernel (kernels/, compiled at first use); the
    #                           PyTorch path is used when False or when it cannot be built here
    tokenizer: str | None = None  # override: a directory with tokenizer.json

    def __post_init__(self) -> None:
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"dtype must be float32, bfloat16 or float16, got {self.dtype!r}")
        if self.block_size < 1:
            raise ValueError("block_size must be >= 1")
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1:
            raise ValueError("max_num_seqs and max_num_batched_tokens must be >= 1")
        if self.eviction_policy not in POLICIES:  # priority: another name for glm
            raise ValueError(f"eviction_policy must be one of {', '.join(POLICIES)}, got {self.eviction_policy!r}")
        if self.chunk_reuse not in ("exact", "pic", "pic0"):
            raise ValueError(f"chunk_reuse must be exact, pic or pic0, got {self.chunk_reuse!r}")
        if self.chunk_source not in ("context", "isolated"):
            raise ValueError(f"chunk_source must be context or isolated, got {self.chunk_source!r}")
        if self.pic_recompute_tokens < 0:
            raise ValueError("pic_recompute_tokens must be >= 0")
        if self.chunk_admission < 1:
            raise ValueError("chunk_admission must be >= 1")
        if not 0.0 <= self.p1_cap_fraction <= 1.0:
            raise ValueError("p1_cap_fraction must be in [0, 1]")
        if self.num_threads is None:
            self.num_threads = os.cpu_count() or 1
