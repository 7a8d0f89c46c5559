"""Model and training presets for glmcot-mini (Qwen3 architecture, tied embeddings)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from glmcot.mini.data import DataConfig


@dataclass
class ModelShape:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int  # the byte-level BPE trained on the examples
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0

    def hf_config(self, eos_token_id: int, pad_token_id: int) -> dict:
        """config.json for Qwen3ForCausalLM (read by transformers, vLLM and the native engine)."""
        shape = asdict(self)
        theta = shape.pop("rope_theta")
        return {
            "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "rms_norm_eps": 1e-6, "hidden_act": "silu",
            "tie_word_embeddings": True, "attention_bias": False, "attention_dropout": 0.0,
            "eos_token_id": eos_token_id, "pad_token_id": pad_token_id, "bos_token_id": None,
            "rope_theta": theta, "rope_scaling": None, "initializer_range": 0.02, "use_cache": True,
            "torch_dtype": "float32", **shape,
        }


@dataclass
class TrainConfig:
    shape: ModelShape
    data: DataConfig = field(default_factory=DataConfig)
    seed: int = 0
    max_length: int = 512        # longer examples are dropped (counted in training.json)
    batch_tokens: int = 4096     # padded tokens per step
    learning_rate: float = 3e-3
    weight_decay: float = 0.01
    warmup_steps: int = 30
    max_steps: int = 2000
    max_minutes: float | None = None  # stop early at this wall time (the CPU run is capped)
    # With max_minutes, the learning rate decays by elapsed time too (whichever of steps and time
    # ends sooner), so a run cut by the cap on a loaded machine still ends at the low rate.
    time_schedule: bool = False
    # Loss weight of reply tokens inside a RetrieveNode argument copied from the prompt.
    copy_weight: float = 1.0
    # Agents whose calls are left out of training (e.g. Graph-CoT's, to spend a short budget on GLM's).
    skip_agents: tuple[str, ...] = ()
    epochs: int = 8
    log_every: int = 10
    eval_every: int = 100
    threads: int | None = None
    device: str = "cpu"


PRESETS: dict[str, TrainConfig] = {
    # Tests: seconds on a CPU.
    "tiny": TrainConfig(ModelShape(64, 128, 2, 2, 1, 32, 512, 1024), DataConfig(domains=("dblp",), train_seeds=(1,), eval_seeds=(1001,),
                        questions_per_template=1, graphcot_seeds=(1,), copy_drills=0.5), max_length=384, batch_tokens=2048, learning_rate=5e-3, warmup_steps=2,
                        max_steps=6, epochs=1, log_every=1, eval_every=0),
    # The 2-core CPU: at most 60 minutes of training (the learning rate decays by steps or time,
    # whichever ends sooner, so a loaded machine still ends the schedule), one torch thread (on a
    # machine shared with other work two threads wait on each other: several times slower per
    # token in the 2026-12-07 run), GLM's calls only. Copy-friendly: two drills per copied argument, half of them made-up words,
    # and copied argument tokens weigh 3x in the loss.
    "cpu": TrainConfig(ModelShape(160, 448, 4, 4, 2, 40, 3072, 2048), DataConfig(train_seeds=tuple(range(1, 13)), eval_seeds=(1001,),
                       questions_per_template=4, graphcot_seeds=(1, 2), copy_drills=2.0, made_up_drills=0.5, processes=2),
                       max_length=640, batch_tokens=2048, learning_rate=3e-3, warmup_steps=100, max_steps=8000, max_minutes=60.0,
                       time_schedule=True, copy_weight=3.0, skip_agents=("graphcot-thought", "graphcot-action"), threads=1,
                       epochs=20, eval_every=250),
    # A GPU when one is lent: the same script, a larger model, more data.
    "gpu": TrainConfig(ModelShape(512, 1536, 8, 8, 4, 64, 8192, 4096), DataConfig(train_seeds=tuple(range(1, 41)), eval_seeds=(1001, 1002),
                       questions_per_template=6, workers=2, processes=14, graphcot_seeds=tuple(range(1, 21)), copy_drills=1.0), max_length=1024, batch_tokens=32768, learning_rate=1e-3,
                       warmup_steps=100, max_steps=6000, max_minutes=45.0, epochs=30, device="cuda"),
}


def preset(name: str, **overrides) -> TrainConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    return replace(PRESETS[name], **{k: v for k, v in overrides.items() if v is not None})
