"""Which LLM backend to use, as a typed value: `BackendSpec`.

The text form ("openai:URL", "vllm+glmcot:URL", "scripted+native:MODEL", ...) exists only at the
edges (command-line flags, config files, benchmark arguments): `BackendSpec.parse` reads it there,
with an error listing every accepted form, and `str(spec)` writes it back. Everything behind the
edge takes the parsed value. A leaf module: it imports nothing of glmcot.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum


class BackendKind(Enum):
    """The model behind a backend (the scripted policy is a flag over one of these, or over none)."""

    OPENAI = "openai"                          # an OpenAI-compatible server, chat completions
    OPENAI_CHAT = "openai-chat"                # the same, spelled out
    OPENAI_COMPLETIONS = "openai-completions"  # an OpenAI-compatible server, plain completions
    VLLM = "vllm"                              # vLLM with glmcot's plugin (token-id prompts, levels)
    SGLANG = "sglang"                          # SGLang with priority eviction (levels as priorities)
    NATIVE = "native"                          # the in-process engine
    REPLAY = "replay"                          # recorded calls or question traces


OPENAI_KINDS = frozenset({BackendKind.OPENAI, BackendKind.OPENAI_CHAT, BackendKind.OPENAI_COMPLETIONS})
ENGINE_SERVER_KINDS = frozenset({BackendKind.VLLM, BackendKind.SGLANG})  # only with the co-design wire
SERVER_KINDS = OPENAI_KINDS | ENGINE_SERVER_KINDS

SCRIPTED = "scripted"
WIRE = "glmcot"  # the "+glmcot" flag: glmcot's co-design fields on the wire

FORMS = (
    "scripted", "scripted+SPEC",
    "openai:URL", "openai-chat:URL", "openai-completions:URL",
    "openai+glmcot:URL", "openai-chat+glmcot:URL", "openai-completions+glmcot:URL",
    "vllm+glmcot:URL", "sglang+glmcot:URL", "native:MODEL", "replay:FILE",
)
SPEC_HELP = (" | ".join(FORMS) + " (SPEC: any other form, under the scripted policy; "
             "MODEL: random:qwen3:tiny, glmcot-mini or a checkpoint directory)")

class BackendSpecError(ValueError):
    """A backend spec that is not one of the accepted forms; the message lists them."""


# --scripted with --llm on these: the scripted policy force-decoded through that server (the
# vLLM plugin's forcing logits processor)
FORCING_SERVER_SPECS = ("vllm+glmcot:",)

@dataclass(frozen=True)
class ServerOptions:
    """How to talk to a server backend (openai*, vllm, sglang); not part of the text form, they
    come from their own flags (--llm-model, --llm-timeout, ...). None: the backend's default."""

    model: str | None = None                  # the model name to ask the server for
    api_key: str | None = field(default=None, repr=False)  # never printed
    timeout_s: float | None = None            # per HTTP request
    max_retries: int | None = None            # retries of a transient failure
    tokenizer: str | None = None              # the served model's tokenizer directory (exact counts, level spans)
    chat_template: bool = False               # vllm: wrap prompts in the tokenizer's chat template
    system_prompt: str | None = None          # openai / sglang chat: a system message first
    glmcot_extras: bool | None = None         # openai: send glmcot serve's fields (None: ask the server)


@dataclass(frozen=True)
class BackendSpec:
    """kind: the model (None only for the scripted policy alone, which counts with the Qwen
    tokenizer); target: its URL, model or file; scripted: the scripted policy over it (it follows
    the questions' gold plans, force-decoding its text through the model); glmcot_wire: the
    "+glmcot" flag (glmcot's co-design fields on the wire); options: see ServerOptions."""

    kind: BackendKind | None
    target: str = ""
    scripted: bool = False
    glmcot_wire: bool = False
    options: ServerOptions = field(default_factory=ServerOptions)

    def __post_init__(self) -> None:
        if self.kind is None:
            if not self.scripted or self.target or self.glmcot_wire:
                raise BackendSpecError("a backend spec without a model is the scripted policy alone: 'scripted'")
            return
        if self.glmcot_wire and self.kind not in SERVER_KINDS:
            raise BackendSpecError(f"{self.kind.value}+{WIRE}: the co-design wire is a server's; "
                                   f"expected {SPEC_HELP}")
        if self.kind in ENGINE_SERVER_KINDS and not self.glmcot_wire:
            raise BackendSpecError(f"unknown backend {self.kind.value!r}; did you mean {self.kind.value}+{WIRE}:URL "
                                   "(or openai:URL for a plain server)?")
        if not self.target:
            named = self._model_text(self.kind.value)
            wanted = {BackendKind.NATIVE: "a model, e.g. native:random:qwen3:tiny or native:/path/to/checkpoint",
                      BackendKind.REPLAY: "the recorded file, e.g. replay:traces.jsonl"}
            raise BackendSpecError(f"{named}: give "
                                   + wanted.get(self.kind, f"the server URL, e.g. {named}:http://127.0.0.1:8000/v1"))

    @classmethod
    def parse(cls, text: str) -> BackendSpec:
        """The one reader of the text form (see FORMS); BackendSpecError names the accepted forms."""
        raw = str(text).strip()
        head, colon, target = raw.partition(":")
        flags = head.split("+")
        scripted = flags[0] == SCRIPTED
        if scripted:
            flags = flags[1:]
            if not flags:
                if colon:
                    raise BackendSpecError(f"unexpected text after 'scripted' in {raw!r}; "
                                           f"did you mean scripted+native:{target}?")
                return cls(kind=None, scripted=True)
        try:
            kind = BackendKind(flags[0])
        except ValueError:
            raise BackendSpecError(f"unknown backend {raw!r}; expected {SPEC_HELP}") from None
        extra = flags[1:]
        if extra and extra != [WIRE]:
            hint = f"did you mean {kind.value}+{WIRE}:URL?" if kind in SERVER_KINDS else f"expected {SPEC_HELP}"
            raise BackendSpecError(f"unknown backend {raw!r}; {hint}")
        return cls(kind=kind, target=target.strip(), scripted=scripted, glmcot_wire=bool(extra))

    def __str__(self) -> str:
        if self.kind is None:
            return SCRIPTED
        return (f"{SCRIPTED}+" if self.scripted else "") + f"{self._model_text(self.kind.value)}:{self.target}"

    def _model_text(self, name: str) -> str:
        return name + (f"+{WIRE}" if self.glmcot_wire else "")

    @property
    def model(self) -> BackendSpec | None:
        """The model behind the scripted policy (this spec without the flag); None for 'scripted'."""
        if self.kind is None:
            return None
        return dataclasses.replace(self, scripted=False)

    @property
    def is_server(self) -> bool:
        return self.kind in SERVER_KINDS

    def with_options(self, **changes: object) -> BackendSpec:
        """This spec with some server options set (the flags that are not part of the text)."""
        return dataclasses.replace(self, options=dataclasses.replace(self.options, **changes))

    @classmethod
    def openai(cls, url: str, **options: object) -> BackendSpec:
        """An OpenAI-compatible server at `url` (chat), e.g. a judge or serve's upstream."""
        return cls(kind=BackendKind.OPENAI, target=url, options=ServerOptions(**options))  # type: ignore[arg-type]
