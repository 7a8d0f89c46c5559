"""Forced decoding inside vLLM: the scripted policy's replies through a real vLLM engine.

A vLLM v1 custom logits processor (vLLM's public extension point for them), loaded with

    vllm serve MODEL --logits-processors glmcot.vllm_plugin.forcing:ForcedTokensLogitsProcessor

For a request whose `vllm_xargs` carry `glmcot_forced` (`glmcot.vllm_plugin.wire`), the i-th
generated token is the i-th forced id and, once they are used up, the end-of-sequence token; every
other request in the batch is left alone. It works on the logits before sampling (every other
token at -inf), so prefill, the prefix cache, scheduling and the KV pool do the work of a real
reply of that length; the model's raw log-probabilities stay its own.

Independent of the eviction plugin (`GLMCOT_VLLM_PLUGIN`): a server may force decoding with
priority eviction on or off. Not an entry point (`vllm.logits_processors`) on purpose: vLLM loads
every installed one into every engine, and its V2 model runner refuses V1-interface processors at
start-up. This class is for the V1 model runner (vLLM's choice on CPU; on GPU set
`VLLM_USE_V2_MODEL_RUNNER=0`).

Malformed forced ids (not a list of non-negative integers, an unknown wire version) are refused
when the request arrives (vLLM answers HTTP 400 with the reason); ids past the model's vocabulary,
which only the engine knows, end the request at once with a warning in the server log, and the
client sees that its tokens did not come back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from glmcot.vllm_plugin.wire import WireError, decode_forced

if TYPE_CHECKING:
    from vllm.config import VllmConfig

logger = logging.getLogger("vllm.plugins.glmcot")  # under vLLM's logger, so its handler prints it


@dataclass
class ForcedRow:
    """One forced request in the persistent batch. `output` is vLLM's own running list of the
    request's generated ids (a reference), so its length is the position being sampled."""

    token_ids: tuple[int, ...]
    output: list[int]
    end_token: int | None

    def next_token(self) -> int | None:
        position = len(self.output)
        if position < len(self.token_ids):
            return self.token_ids[position]
        return self.end_token


def end_token(params: SamplingParams) -> int | None:
    """The token that ends this request after its forced ids: the model's EOS, else one of its
    stop tokens; None when it has neither (then generation runs on to max_tokens unforced)."""
    if params.eos_token_id is not None:
        return int(params.eos_token_id)
    stops = sorted(params.all_stop_token_ids or ())
    return int(stops[0]) if stops else None


class ForcedTokensLogitsProcessor(LogitsProcessor):
    """See the module docstring."""

    def __init__(self, vllm_config: "VllmConfig", device: torch.device, is_pin_memory: bool) -> None:
        self.vocab_size = int(vllm_config.model_config.get_vocab_size())
        self.device = device
        self.rows: dict[int, ForcedRow] = {}  # persistent-batch index -> forced request
        self.refused = 0  # forced requests whose ids were out of the vocabulary (ended at once)

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Runs in the API server as each request arrives: a ValueError becomes HTTP 400."""
        try:
            decode_forced(sampling_params.extra_args)
        except WireError as error:
            raise ValueError(f"glmcot forced decoding: {error}") from None

    def is_argmax_invariant(self) -> bool:
        return False  # it decides the greedy token

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        # vLLM's order: removed, then added (which may reuse a freed index), then moved.
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, _prompt, output in batch_update.added:
            row = self._row(params, output)
            if row is None:
                self.rows.pop(index, None)
            else:
                self.rows[index] = row
        for source, target, direction in batch_update.moved:
            moving = self.rows.pop(source, None)
            displaced = self.rows.pop(target, None)
            if moving is not None:
                self.rows[target] = moving
            if direction == MoveDirectionality.SWAP and displaced is not None:
                self.rows[source] = displaced

    def _row(self, params: SamplingParams, output: list[int]) -> ForcedRow | None:
        try:
            forced = decode_forced(params.extra_args)
        except WireError:  # validate_params refuses these before they get here
            return None
        if forced is None:
            return None
        outside = [token for token in forced if token >= self.vocab_size]
        if outside:
            self.refused += 1
            logger.warning("glmcot forced decoding: token ids %s are outside the vocabulary (%d ids); "
                           "the request ends at once", outside[:8], self.vocab_size)
            forced = ()
        return ForcedRow(forced, output, end_token(params))

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        indices: list[int] = []
        tokens: list[int] = []
        for index, row in self.rows.items():
            token = row.next_token()
            if token is None or index >= logits.shape[0] or not 0 <= token < logits.shape[1]:
                continue
            indices.append(index)
            tokens.append(token)
        if indices:
            where = torch.tensor(indices, dtype=torch.long, device=logits.device)
            chosen = torch.tensor(tokens, dtype=torch.long, device=logits.device)
            logits[where] = float("-inf")
            logits[where, chosen] = 0.0
        return logits

