"""Evaluation settings: command-line options > GLMCOT_* environment variables > config file > defaults.

The config file is TOML (keys at the top level or under an ``[eval]`` table). It is read from
``--config``, else ``$GLMCOT_CONFIG``, else ``~/.config/glmcot/config.toml`` when that exists.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

ENV_PREFIX = "GLMCOT_"
DEFAULT_CONFIG_FILE = Path("~/.config/glmcot/config.toml")


class ConfigError(ValueError):
    """A setting has a bad value or the config file cannot be read."""


def default_cache_dir() -> Path:
    return Path(os.environ.get("GLMCOT_CACHE") or Path.home() / ".cache" / "glmcot")


@dataclass
class EvalConfig:
    """Everything `glmcot ask/eval/demo/bench` can be told. Prices are dollars per million tokens."""

    llm: str | None = None                 # OpenAI-compatible base URL
    llm_model: str | None = None           # model name on that server
    llm_api_key: str | None = None         # also read from OPENAI_API_KEY; never GLMCOT_API_KEY (the server's own login key)
    llm_timeout: float = 120.0             # seconds per HTTP request to the --llm server
    llm_retries: int = 4                   # retries of a transient --llm failure (5 tries in all)
    model: str | None = None               # local checkpoint dir (native engine) or random:qwen3:<size>
    judge_llm: str | None = None           # judge server URL; default: the answering backend
    judge_model: str | None = None         # the judge's model, named in every report
    judge_rule: str = "original"           # original: GPT4score as Graph-CoT scores; lenient: labelled
    concurrency: int = 4
    max_steps: int = 10
    top_k: int = 5                         # text-rag: node texts per question
    graph_rag_hops: int = 2
    graph_rag_tokens: int = 2300           # graph-rag context budget (Graph-CoT used 2300-3600)
    price_input: float = 75.0              # GPT-4.5 list prices, as the paper's cost column
    price_cached_input: float = 37.5
    price_output: float = 150.0
    device: str = "auto"
    dtype: str = "float32"
    cache_dir: Path = field(default_factory=default_cache_dir)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["cache_dir"] = str(self.cache_dir)
        if out.get("llm_api_key"):
            out["llm_api_key"] = "***"
        return out


def _coerce(name: str, kind: Any, value: Any, source: str) -> Any:
    if value is None:
        return None
    text = str(value).strip() if not isinstance(value, (int, float)) else value
    try:
        if kind in ("int", int):
            return int(text)
        if kind in ("float", float):
            return float(text)
        if kind in ("Path", Path):
            return Path(str(text)).expanduser()
    except (TypeError, ValueError):
        wanted = {"int": "an integer", "float": "a number", "Path": "a path"}.get(str(kind), str(kind))
        raise ConfigError(f"{source}: {name} must be {wanted}, got {value!r}") from None
    return str(text)


def _kind(f: dataclasses.Field) -> str:
    t = str(f.type)
    if t.startswith("int"):
        return "int"
    if t.startswith("float"):
        return "float"
    if t.startswith("Path"):
        return "Path"
    return "str"


def read_config_file(path: Path) -> dict[str, Any]:
    """Reads a TOML config file; unknown keys are an error so typos do not pass silently."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    section = data.get("eval", data)
    if not isinstance(section, dict):
        raise ConfigError(f"config file {path}: [eval] must be a table")
    known = {f.name for f in fields(EvalConfig)}
    flat = {k.replace("-", "_"): v for k, v in section.items() if k != "eval"}
    unknown = sorted(set(flat) - known)
    if unknown:
        raise ConfigError(f"config file {path}: unknown setting(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(known))}")
    return flat


def load_config(options: Mapping[str, Any] | None = None, config_file: Path | None = None,
                environ: Mapping[str, str] | None = None) -> EvalConfig:
    """Builds the config; ``options`` holds command-line values (None = not given)."""
    options = dict(options or {})
    environ = os.environ if environ is None else environ
    path = config_file or (Path(environ["GLMCOT_CONFIG"]) if environ.get("GLMCOT_CONFIG") else None)
    from_file: dict[str, Any] = {}
    if path is not None:
        from_file = read_config_file(Path(path).expanduser())
    elif DEFAULT_CONFIG_FILE.expanduser().is_file():
        from_file = read_config_file(DEFAULT_CONFIG_FILE.expanduser())
    values: dict[str, Any] = {}
    for f in fields(EvalConfig):
        kind = _kind(f)
        env_name = ENV_PREFIX + f.name.upper()
        if options.get(f.name) is not None:
            values[f.name] = _coerce(f.name, kind, options[f.name], f"--{f.name.replace('_', '-')}")
        elif environ.get(env_name):
            values[f.name] = _coerce(f.name, kind, environ[env_name], env_name)
        elif f.name == "cache_dir" and environ.get("GLMCOT_CACHE"):
            values[f.name] = Path(environ["GLMCOT_CACHE"]).expanduser()
        elif f.name == "llm_api_key" and environ.get("OPENAI_API_KEY"):
            values[f.name] = environ["OPENAI_API_KEY"]
        elif f.name in from_file:
            values[f.name] = _coerce(f.name, kind, from_file[f.name], f"config file {path}")
    config = EvalConfig(**values)
    if config.concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {config.concurrency}")
    if config.llm_timeout <= 0:
        raise ConfigError(f"llm_timeout must be positive, got {config.llm_timeout}")
    if config.llm_retries < 0:
        raise ConfigError(f"llm_retries must be 0 or more, got {config.llm_retries}")
    if config.max_steps < 1:
        raise ConfigError(f"max_steps must be at least 1, got {config.max_steps}")
    if config.judge_rule not in ("original", "lenient"):
        raise ConfigError(f"judge_rule must be original or lenient, got {config.judge_rule!r}")
    for name in ("price_input", "price_cached_input", "price_output"):
        if getattr(config, name) < 0:
            raise ConfigError(f"{name} must not be negative")
    return config
