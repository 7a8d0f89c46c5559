"""One compact dense decoder covering Qwen2 (qkv bias), Qwen3 (q/k norm) and Llama (rope scaling).

The model takes packed tokens of many sequences ([tokens]) plus attention metadata and the KV
cache, and returns hidden states; logits are computed only for the rows that are sampled.
Parameter names follow Hugging Face, except the fused `qkv_proj` and `gate_up_proj`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

from glmcot.engine.layers.attention import AttentionMetadata, paged_attention
from glmcot.engine.layers.linear import Linear
from glmcot.engine.layers.mlp import SwiGLU
from glmcot.engine.layers.norm import RMSNorm
from glmcot.engine.layers.rotary import RotaryEmbedding, apply_rotary
from glmcot.engine.models.config import ModelConfig


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, rotary: RotaryEmbedding) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.q_size, self.kv_size = self.heads * self.head_dim, self.kv_heads * self.head_dim
        self.qkv_proj = Linear(cfg.hidden_size, self.q_size + 2 * self.kv_size, bias=cfg.qkv_bias)
        self.o_proj = Linear(self.q_size, cfg.hidden_size, bias=cfg.o_bias)
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps) if cfg.qk_norm else None
        self.rotary = rotary
        self.rotary_kernel: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None] | None = None  # in place, CPU

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], cache: torch.Tensor,
                meta: AttentionMetadata) -> torch.Tensor:
        q, k, v = self.qkv_proj(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = q.view(-1, self.heads, self.head_dim)
        k = k.view(-1, self.kv_heads, self.head_dim)
        v = v.view(-1, self.kv_heads, self.head_dim)
        if self.q_norm is not None:
            # Qwen3 normalises each head before RoPE, so cached K is post-norm and post-RoPE.
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rotary_kernel is not None:  # q and k are this step's fresh rows: rotate them in place
            self.rotary_kernel(q, *rope)
            self.rotary_kernel(k, *rope)
        else:
            q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        return self.o_proj(paged_attention(q, k, v, cache, meta))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, rotary: RotaryEmbedding) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg, rotary)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size, cfg.mlp_bias)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], cache: torch.Tensor,
                meta: AttentionMetadata) -> torch.Tensor:
        # In-place residual adds on the sublayers' fresh outputs: fewer large allocations.
        x = self.self_attn(self.input_layernorm(x), rope, cache, meta).add_(x)
        return self.mlp(self.post_attention_layernorm(x)).add_(x)


class DecoderModel(nn.Module):
    def __init__(self, cfg: ModelConfig, max_positions: int) -> None:
        super().__init__()
        self.config = cfg
        rotary = RotaryEmbedding(cfg.head_dim, max_positions, cfg.rope_theta, cfg.rope_scaling)
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, rotary) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary = rotary
        self.lm_head = None if cfg.tie_word_embeddings else Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.tied_head: Linear | None = None  # tied embeddings on CPU: the logits in the CPU layout

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, kv_cache: torch.Tensor, meta: AttentionMetadata) -> torch.Tensor:
        """kv_cache: [layers, 2, num_blocks, block_size, kv_heads, head_dim]."""
        x = self.embed_tokens(input_ids)
        rope = self.rotary.tables(positions, x.dtype)
        for i, layer in enumerate(self.layers):
            x = layer(x, rope, kv_cache[i], meta)
        return self.norm(x)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        head = self.lm_head if self.lm_head is not None else self.tied_head
        if head is None:
            return F.linear(hidden, self.embed_tokens.weight).float()
        return head(hidden).float()

    def bind_cpu_kernels(self, kernels) -> None:
        """Route RMSNorm and rotary embedding through the compiled CPU kernels (kernels/)."""
        for module in self.modules():
            if isinstance(module, RMSNorm):
                module.kernel = kernels.rms_norm
            elif isinstance(module, Attention):
                module.rotary_kernel = kernels.rotary_

    @torch.no_grad()
    def prepare_for_cpu(self) -> None:
        """Re-lay every projection and the logits matrix out for CPU matmuls (layers/linear.py).
        Call once, after the weights are loaded."""
        for module in self.modules():
            if isinstance(module, Linear):
                module.prepare_for_cpu()
        if self.lm_head is None:
            # Tied: the logits get a Linear of their own over the embedding matrix. When it keeps
            # an [in, out] copy, the embedding becomes a view of that copy (lookups then gather
            # columns, well under 1 % of a prefill) so the matrix is not held twice.
            head = Linear.over(self.embed_tokens.weight)
            head.prepare_for_cpu()
            if head.weight_t is not None:
                self.embed_tokens.weight = head.weight
            self.tied_head = head

    @torch.no_grad()
    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Load Hugging Face-named tensors; q/k/v and gate/up go into their fused slices.
        Raises if a parameter is missing or a name is unknown."""
        params = dict(self.named_parameters())
        cfg = self.config
        qkv_offsets = {"q": (0, cfg.num_heads * cfg.head_dim)}
        kv = cfg.num_kv_heads * cfg.head_dim
        qkv_offsets["k"] = (qkv_offsets["q"][1], qkv_offsets["q"][1] + kv)
        qkv_offsets["v"] = (qkv_offsets["k"][1], qkv_offsets["k"][1] + kv)
        up_offsets = {"gate": (0, cfg.intermediate_size), "up": (cfg.intermediate_size, 2 * cfg.intermediate_size)}
        loaded: set[str] = set()
        pending: dict[str, set] = {}
        for name, tensor in weights:
            name = name.removeprefix("model.")
            if name == "lm_head.weight" and self.lm_head is None:
                continue  # tied: some checkpoints store the copy anyway
            target, rows = name, None
            for part, (a, b) in qkv_offsets.items():
                if f"self_attn.{part}_proj." in name:
                    target, rows = name.replace(f"{part}_proj", "qkv_proj"), (a, b)
            for part, (a, b) in up_offsets.items():
                if f"mlp.{part}_proj." in name:
                    target, rows = name.replace(f"{part}_proj", "gate_up_proj"), (a, b)
            if target not in params:
                raise ValueError(f"checkpoint tensor {name!r} has no place in the {cfg.family} model")
            param = params[target]
            dest = param if rows is None else param[rows[0] : rows[1]]
            if tuple(dest.shape) != tuple(tensor.shape):
                raise ValueError(f"shape mismatch for {name!r}: checkpoint {tuple(tensor.shape)}, model {tuple(dest.shape)}")
            dest.copy_(tensor.to(param.dtype))
            if rows is None:
                loaded.add(target)
            else:
                pending.setdefault(target, set()).add(rows)
        for target, parts in pending.items():
            if sum(b - a for a, b in parts) == params[target].shape[0]:
                loaded.add(target)
        missing = sorted(set(params) - loaded)
        if missing:
            raise ValueError(f"checkpoint is missing tensors: {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}")
