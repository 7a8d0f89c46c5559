"""Streaming text: incremental detokenisation, stop strings and the delta/line callbacks.

Text is emitted only once it is final: a token that ends inside a UTF-8 character is held back
until the character completes, and the last (longest stop string - 1) characters are held back
until no stop string can begin there, so the deltas always join to exactly the final text.
"""

from __future__ import annotations

from collections.abc import Callable

from glmcot.engine.models.tokenizer import Tokenizer

REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    """Decodes a growing token list window by window (the vLLM approach): the new text is what
    decoding [prefix:] adds over decoding [prefix:read]. A few prompt tokens seed the window so
    tokenizers that strip a leading space (sentencepiece) decode the first token correctly."""

    def __init__(self, tokenizer: Tokenizer, prompt_tail: list[int]) -> None:
        self.tokenizer = tokenizer
        tail = list(prompt_tail[-4:])
        if tail and tokenizer.decode(tail).endswith(REPLACEMENT):
            tail = []
        self.tokens = tail
        self.prefix = 0
        self.read = len(tail)

    def add(self, token_id: int) -> str:
        self.tokens.append(token_id)
        before = self.tokenizer.decode(self.tokens[self.prefix : self.read])
        after = self.tokenizer.decode(self.tokens[self.prefix :])
        if len(after) > len(before) and not after.endswith(REPLACEMENT):
            self.prefix, self.read = self.read, len(self.tokens)
            return after[len(before) :]
        return ""

    def flush(self) -> str:
        before = self.tokenizer.decode(self.tokens[self.prefix : self.read])
        after = self.tokenizer.decode(self.tokens[self.prefix :])
        self.prefix = self.read = len(self.tokens)
        return after[len(before) :] if len(after) > len(before) else ""


class TextStream:
    def __init__(self, tokenizer: Tokenizer, prompt_token_ids: list[int], stop: list[str],
                 on_delta: Callable[[str], None] | None = None, on_line: Callable[[str], None] | None = None) -> None:
        self.detokenizer = IncrementalDetokenizer(tokenizer, prompt_token_ids)
        self.stop = stop
        self.hold = max((len(s) for s in stop), default=1) - 1
        self.on_delta, self.on_line = on_delta, on_line
        self.text = ""
        self.emitted = 0
        self.line = ""

    def add_token(self, token_id: int) -> bool:
        """Decode one token; True when a stop string completed (the text is cut before it)."""
        return self._extend(self.detokenizer.add(token_id))

    def _extend(self, delta: str) -> bool:
        if not delta:
            return False
        start = max(0, len(self.text) - self.hold)
        self.text += delta
        hits = [i for i in (self.text.find(s, start) for s in self.stop) if i >= 0]
        if hits:
            self.text = self.text[: min(hits)]
            return True
        return False

    def finish(self, stopped_by_string: bool) -> None:
        if not stopped_by_string:
            self._extend(self.detokenizer.flush())
        self.publish(final=True)

    def publish(self, final: bool = False) -> None:
        upto = len(self.text) if final else len(self.text) - self.hold
        if upto > self.emitted:
            delta = self.text[self.emitted : upto]
            self.emitted = upto
            if self.on_delta is not None:
                self.on_delta(delta)
            if self.on_line is not None:
                self.line += delta
                *complete, self.line = self.line.split("\n")
                for line in complete:
                    self.on_line(line)
        if final and self.on_line is not None and self.line:
            line, self.line = self.line, ""
            self.on_line(line)
