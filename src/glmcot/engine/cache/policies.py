"""The eviction-policy registry: the names `EngineConfig.eviction_policy` accepts."""

from __future__ import annotations

from collections.abc import Callable

from glmcot.engine.cache.eviction import EvictionPolicy, LRUEviction
from glmcot.engine.cache.priority import PriorityEviction


def _priority(split_p3: bool) -> Callable[[int, float], EvictionPolicy]:
    def make(num_blocks: int, p1_cap_fraction: float) -> EvictionPolicy:
        return PriorityEviction(int(p1_cap_fraction * num_blocks), split_p3=split_p3)

    return make


# four-level priority (P4 first, P1 last), LRU inside a level; P3 prefix blocks no other session
# has read go before the rest of P3 (cache/priority.py)
_GLM = _priority(split_p3=True)
POLICIES: dict[str, Callable[..., EvictionPolicy]] = {
    "lru": lambda num_blocks, p1_cap_fraction: LRUEviction(),
    "glm": _GLM,
    "glm-paper": _priority(split_p3=False),  # the four levels exactly as the paper describes them
    "priority": _GLM,  # another name for glm
}


def make_eviction_policy(name: str, num_blocks: int = 0, p1_cap_fraction: float = 0.25) -> EvictionPolicy:
    """`p1_cap_fraction`: for `glm`, the share of the pool that P1 blocks may hold protected."""
    if name not in POLICIES:
        raise ValueError(f"unknown eviction policy {name!r}; known: {', '.join(POLICIES)}")
    return POLICIES[name](num_blocks, p1_cap_fraction)
