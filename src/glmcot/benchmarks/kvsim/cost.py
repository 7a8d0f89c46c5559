"""The simulator's time model: one engine step's duration from what it computes and reads.

Cache bookkeeping in the simulator is the real code; time is this model. A step that computes
`n` prompt/decode tokens with attention over their contexts, on a model sharded over `tp` GPUs:

    compute  = (2 * active_params * n + 4 * layers * q_heads * head_dim * sum(context of each token))
               / (tp * peak_flops * mfu)
    memory   = (weight bytes read + KV bytes read for every sequence's context) / tp / (hbm_bw * mbu)
    step     = max(compute, memory) + allreduce (2 per layer, ring, over NVLink) + step_overhead

Weights read per step: the dense part always; for a mixture of experts the experts that at least
one of the step's tokens routes to (expected share 1 - (1 - k/E)^n with k of E experts per token).
The KV pool is the GPU memory vLLM may use (`gpu_memory_utilization`), less the weights' share and
an activation reserve, at the model's KV bytes per token on one GPU (KV heads are split over the
tensor-parallel ranks, replicated when there are fewer heads than ranks).

Every constant below names its source; each is overridable (`--gpu-override KEY=VALUE`,
`--model-override KEY=VALUE`, `--cost-override KEY=VALUE`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

GIB = 1 << 30


@dataclass(frozen=True)
class GPU:
    name: str
    bf16_tflops: float  # dense tensor-core peak, no sparsity
    hbm_tb_s: float
    memory_gb: float
    nvlink_gb_s: float  # per GPU, both directions together
    source: str


@dataclass(frozen=True)
class Model:
    name: str
    params_b: float  # all weights, billions
    active_params_b: float  # weights used per token (a mixture of experts uses a few experts)
    layers: int
    q_heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    experts: int = 0  # routed experts per MoE layer (0: dense)
    experts_per_token: int = 0
    dtype_bytes: int = 2  # BF16 weights and KV
    source: str = ""

    @property
    def expert_params_b(self) -> float:
        """Routed-expert weights (from total and active: active = dense + k/E of the experts)."""
        if not self.experts:
            return 0.0
        share = self.experts_per_token / self.experts
        return (self.params_b - self.active_params_b) / (1 - share)

    def kv_bytes_per_token(self, tp: int = 1) -> int:
        """KV bytes one token takes on one GPU (K and V, every layer)."""
        heads_per_gpu = max(1, math.ceil(self.kv_heads / tp))
        return 2 * self.layers * heads_per_gpu * self.head_dim * self.dtype_bytes


@dataclass(frozen=True)
class CostConstants:
    mfu: float = 0.5  # share of peak FLOPs a prefill step reaches (assumption: typical of large-model prefill in
    #                    vLLM/SGLang on Hopper, 40-60 %; override with a measured figure)
    mbu: float = 0.6  # share of HBM bandwidth a decode step reaches: Databricks, "LLM Inference Performance
    #                    Engineering: Best Practices" (2023) measured ~60 % MBU on H100 at small batch
    step_overhead_s: float = 0.002  # scheduler, launch and sampling per step (assumption, vLLM v1 with CUDA graphs)
    allreduce_latency_s: float = 8e-6  # per all-reduce on NVLink at small sizes (assumption, NCCL ring, 8 GPUs)
    gpu_memory_utilization: float = 0.9  # vLLM's default
    activation_reserve_gb: float = 2.0  # per GPU, activations and CUDA graphs (assumption; vLLM profiles it)
    additive: bool = False  # compute and memory time add up instead of overlapping (a CPU: calibrate.py)


GPUS = {
    "H100": GPU("H100", 989.4, 3.35, 80, 900, "NVIDIA H100 SXM5 datasheet: 989.4 TFLOPS BF16 dense, 3.35 TB/s HBM3, "
                "80 GB, NVLink 900 GB/s"),
    "H200": GPU("H200", 989.4, 4.8, 141, 900, "NVIDIA H200 SXM datasheet: 989 TFLOPS BF16 dense, 4.8 TB/s HBM3e, "
                "141 GB, NVLink 900 GB/s"),
    "A800": GPU("A800", 312.0, 2.039, 80, 400, "NVIDIA A800 80GB SXM datasheet (A100 silicon): 312 TFLOPS BF16 dense, "
                "2,039 GB/s HBM2e, 80 GB, NVLink 400 GB/s"),
}

MODELS = {
    "Qwen3-8B": Model("Qwen3-8B", 8.19, 8.19, 36, 32, 8, 128, 4096,
                      source="Qwen3-8B config.json and model card: 8.2 B params, 36 layers, 32 Q / 8 KV heads, head 128"),
    "Qwen3-32B": Model("Qwen3-32B", 32.8, 32.8, 64, 64, 8, 128, 5120,
                       source="Qwen3-32B config.json and model card: 32.8 B params, 64 layers, 64 Q / 8 KV heads, head 128"),
    "Qwen3-235B-A22B": Model("Qwen3-235B-A22B", 235.0, 22.0, 94, 64, 4, 128, 4096, experts=128, experts_per_token=8,
                             source="Qwen3-235B-A22B config.json and model card: 235 B total / 22 B active, 94 layers, "
                                    "64 Q / 4 KV heads, head 128, 128 experts, 8 per token"),
}


@dataclass(frozen=True)
class Deployment:
    gpu: GPU
    model: Model
    tp: int
    constants: CostConstants = field(default_factory=CostConstants)

    @property
    def label(self) -> str:
        return f"{self.tp}x {self.gpu.name}, {self.model.name}"

    @property
    def kv_bytes_per_token(self) -> int:
        return self.model.kv_bytes_per_token(self.tp)

    def weight_bytes_per_gpu(self) -> float:
        return self.model.params_b * 1e9 * self.model.dtype_bytes / self.tp

    def kv_pool_tokens(self) -> int:
        """Tokens of KV the GPUs hold after the weights (what vLLM would allocate), 0 if none."""
        c = self.constants
        free = self.gpu.memory_gb * 1e9 * c.gpu_memory_utilization - self.weight_bytes_per_gpu() \
            - c.activation_reserve_gb * 1e9
        return max(0, int(free // self.kv_bytes_per_token))

    def step_time(self, computed: list[tuple[int, int]]) -> float:
        """Seconds for one step; `computed`: (tokens computed, context length at the end of them)
        per scheduled sequence (a decode is (1, its length))."""
        if not computed:
            return 0.0
        m, g, c = self.model, self.gpu, self.constants
        tokens = sum(n for n, _ in computed)
        # each computed token attends over the context up to itself: n tokens ending at L see
        # L - n + 1 .. L positions
        attended = sum(n * end - n * (n - 1) / 2 for n, end in computed)
        flops = 2 * m.active_params_b * 1e9 * tokens + 4 * m.layers * m.q_heads * m.head_dim * attended
        compute = flops / (self.tp * g.bf16_tflops * 1e12 * c.mfu)
        dense = (m.params_b - m.expert_params_b) * 1e9
        experts = m.expert_params_b * 1e9 * (1 - (1 - m.experts_per_token / m.experts) ** tokens) if m.experts else 0.0
        weight_bytes = (dense + experts) * m.dtype_bytes / self.tp
        kv_bytes = sum(end for _, end in computed) * self.kv_bytes_per_token
        memory = (weight_bytes + kv_bytes) / (g.hbm_tb_s * 1e12 * c.mbu)
        allreduce = 0.0
        if self.tp > 1:
            size = tokens * m.hidden * m.dtype_bytes
            per = c.allreduce_latency_s + 2 * (self.tp - 1) / self.tp * size / (g.nvlink_gb_s / 2 * 1e9)
            allreduce = 2 * m.layers * per
        busy = compute + memory if c.additive else max(compute, memory)
        return busy + allreduce + c.step_overhead_s

    def describe(self) -> dict:
        return {"label": self.label, "tp": self.tp, "gpu": vars(self.gpu), "model": vars(self.model),
                "constants": vars(self.constants), "kv_bytes_per_token_per_gpu": self.kv_bytes_per_token,
                "kv_pool_tokens": self.kv_pool_tokens()}


def _override(obj, items: list[str]):
    """`KEY=VALUE` strings applied to a frozen dataclass (numbers parsed); ValueError names the key."""
    names = {f.name: f for f in fields(obj)}
    changes = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in names:
            raise ValueError(f"{item!r}: expected KEY=VALUE with KEY one of {', '.join(names)}")
        current = getattr(obj, key)
        try:
            if isinstance(current, bool):
                if value.lower() not in ("true", "false", "1", "0"):
                    raise ValueError
                changes[key] = value.lower() in ("true", "1")
            else:
                changes[key] = type(current)(value) if not isinstance(current, str) else value
        except ValueError:
            raise ValueError(f"{item!r}: {key} must be a {type(current).__name__}") from None
    return replace(obj, **changes)


def deployment(spec: str, gpu_overrides: list[str] = (), model_overrides: list[str] = (),
               cost_overrides: list[str] = ()) -> Deployment:
    """`GPU:MODEL:TP`, e.g. `A800:Qwen3-235B-A22B:8`."""
    parts = spec.split(":")
    if len(parts) != 3 or parts[0] not in GPUS or parts[1] not in MODELS or not parts[2].isdigit() or int(parts[2]) < 1:
        raise ValueError(f"deployment {spec!r}: expected GPU:MODEL:TP with GPU in {', '.join(GPUS)} and MODEL in "
                         f"{', '.join(MODELS)}")
    return Deployment(_override(GPUS[parts[0]], list(gpu_overrides)), _override(MODELS[parts[1]], list(model_overrides)),
                      int(parts[2]), _override(CostConstants(), list(cost_overrides)))
