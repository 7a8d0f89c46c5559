"""Constrained decoding: a reply's grammar (EBNF, xgrammar's dialect) turned into a token mask
applied to the logits before sampling.

`Grammar` is the request-side record (plain text, so it crosses process boundaries and can be sent
to a vLLM server as a structured-output grammar). `GrammarCompiler` belongs to one engine (one
tokenizer): it compiles each distinct grammar once (an LRU keyed by the grammar text, so a grammar
built once per graph schema is compiled once) and hands each request its own `GrammarState`.
The mask costs are counted (`mask_seconds`, `masked_steps`) so benchmarks can compare them with
unconstrained decoding in the same run.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Choices:
    """Inside the grammar, the text between each `opener` and the next `closer` must be one of
    `choices` (e.g. RetrieveNode's text: a span of the question). Applied as a second mask on top
    of the grammar's, so the grammar itself (and its compiled form) stays the same per schema."""

    opener: str
    closer: str
    choices: tuple[str, ...]


@dataclass(frozen=True)
class Grammar:
    """What a reply may be: EBNF text with a `root` rule; `name` says what it constrains."""

    ebnf: str
    name: str = ""
    choices: Choices | None = None


class GrammarError(ValueError):
    """A grammar that does not compile, or a tokenizer that constrained decoding cannot use."""


class GrammarState:
    """One request's matcher: masks its logits row, then accepts the token sampled from it."""

    def __init__(self, matcher: Any, bitmask: Any, owner: "GrammarCompiler", choices: Choices | None = None):
        self.matcher = matcher
        self.bitmask = bitmask
        self.owner = owner
        self.choices = choices
        self.text = ""  # the reply so far (for `choices`)

    def open_choice(self) -> str | None:
        """The text written since an unclosed `choices.opener`, or None outside one."""
        if self.choices is None:
            return None
        start = self.text.rfind(self.choices.opener)
        if start < 0:
            return None
        written = self.text[start + len(self.choices.opener):]
        return None if self.choices.closer in written else written

    def mask(self, row: Any) -> None:
        """Sets the logits of every token the grammar forbids to -inf (in place; row: [vocab])."""
        import torch
        import xgrammar

        started = time.perf_counter()
        # the engine's logits may be inference tensors: update them in place only in inference mode
        with torch.inference_mode():
            if not self.matcher.is_terminated():
                self.matcher.fill_next_token_bitmask(self.bitmask)
                xgrammar.apply_token_bitmask_inplace(row.unsqueeze(0), self.bitmask, vocab_size=row.shape[-1])
                written = self.open_choice()
                if written is not None:
                    self._mask_choices(row, written)
        self.owner.count(time.perf_counter() - started)

    def _mask_choices(self, row: Any, written: str) -> None:
        """Keeps only tokens that continue `written` toward one of the choices (or close it)."""
        closer = self.choices.closer
        targets = [choice + closer for choice in self.choices.choices if choice.startswith(written)]
        if not targets:
            return  # already off every choice (cannot happen from the start): the grammar alone rules
        import torch

        allowed: set[int] = set()
        for rest in {target[len(written):] for target in targets}:
            # a token fits when it is the start of what remains, or runs past the closer
            for token, piece in self.owner.by_first_char.get(rest[0], ()):
                if token < row.shape[-1] and (rest.startswith(piece) or piece.startswith(rest)):
                    allowed.add(token)
        keep = torch.full_like(row, float("-inf"))
        if allowed:
            index = torch.tensor(sorted(allowed))
            keep[index] = row[index]
            row.copy_(keep)

    def accept(self, token: int) -> None:
        if not self.matcher.is_terminated() and not self.matcher.accept_token(int(token)):
            raise GrammarError(f"token {token} is outside the request's grammar")
        if self.choices is not None and 0 <= token < len(self.owner.pieces):
            self.text += self.owner.pieces[token]

    @property
    def done(self) -> bool:
        """The grammar's root is complete and only the end of text may follow."""
        return bool(self.matcher.is_terminated())


class GrammarCompiler:
    """Compiled grammars of one engine's tokenizer (LRU by grammar text) and per-request states."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_token_ids: tuple[int, ...], cache_size: int = 64):
        import xgrammar

        backend = getattr(tokenizer, "_backend", None)
        if getattr(tokenizer, "kind", None) != "hf" or backend is None:
            raise GrammarError("constrained decoding needs a Hugging Face (tokenizer.json) tokenizer")
        from transformers import PreTrainedTokenizerFast

        fast = PreTrainedTokenizerFast(tokenizer_object=backend)
        info = xgrammar.TokenizerInfo.from_huggingface(fast, vocab_size=vocab_size, stop_token_ids=list(stop_token_ids))
        special = set(getattr(tokenizer, "special_ids", ()) or ())
        # each token's text (for `Choices`; a token that is part of a multi-byte character decodes
        # to a replacement character and is never a choice's continuation)
        self.pieces = ["" if token in special else backend.decode([token], skip_special_tokens=False)
                       for token in range(min(vocab_size, backend.get_vocab_size(with_added_tokens=True)))]
        self.by_first_char: dict[str, list[tuple[int, str]]] = {}
        for token, piece in enumerate(self.pieces):
            if piece and "\ufffd" not in piece:
                self.by_first_char.setdefault(piece[0], []).append((token, piece))
        self.vocab_size = vocab_size
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1)
        self.cache: OrderedDict[str, Any] = OrderedDict()
        self.cache_size = cache_size
        self.lock = threading.Lock()
        self.compiled = 0          # grammars compiled (cache misses)
        self.compile_seconds = 0.0
        self.mask_seconds = 0.0    # time spent filling and applying masks
        self.masked_steps = 0      # logits rows masked

    def compile(self, grammar: Grammar) -> Any:
        import xgrammar

        with self.lock:  # keyed by the text alone: `choices` are applied per request, not compiled
            hit = self.cache.get(grammar.ebnf)
            if hit is not None:
                self.cache.move_to_end(grammar.ebnf)
                return hit
        started = time.perf_counter()
        try:
            compiled = self.compiler.compile_grammar(xgrammar.Grammar.from_ebnf(grammar.ebnf))
        except Exception as error:  # xgrammar raises its own RuntimeError with the parse position
            raise GrammarError(f"grammar {grammar.name or ''} does not compile: {error}") from None
        with self.lock:
            self.compiled += 1
            self.compile_seconds += time.perf_counter() - started
            self.cache[grammar.ebnf] = compiled
            while len(self.cache) > self.cache_size:
                self.cache.popitem(last=False)
        return compiled

    def state(self, grammar: Grammar) -> GrammarState:
        import xgrammar

        matcher = xgrammar.GrammarMatcher(self.compile(grammar))
        return GrammarState(matcher, xgrammar.allocate_token_bitmask(1, self.vocab_size), self, grammar.choices)

    def count(self, seconds: float) -> None:
        self.mask_seconds += seconds
        self.masked_steps += 1

    def stats(self) -> dict[str, Any]:
        return {"grammars_compiled": self.compiled, "grammar_compile_s": round(self.compile_seconds, 6),
                "grammar_mask_s": round(self.mask_seconds, 6), "grammar_masked_steps": self.masked_steps}
