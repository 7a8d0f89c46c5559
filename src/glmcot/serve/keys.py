"""Per-graph access: API keys from a keys file, each granting a set of graphs, the update right,
the admin right (add and remove graphs) and a request rate.

The keys file (JSON; re-read when it changes, so keys can be added or revoked while serving)::

    {"keys": [
      {"name": "analyst", "key": "s3cret-analyst", "graphs": ["dblp"]},
      {"name": "ingest", "key_sha256": "<hex digest of the key>", "graphs": ["dblp"], "update": true,
       "requests_per_minute": 120},
      {"name": "ops", "key": "s3cret-ops", "graphs": "*", "update": true, "admin": true}
    ]}

A key that does not grant a graph gets 404 for it, exactly as for a graph that does not exist, so
keys cannot probe which graphs a server holds. Without a keys file the server's one `--api-key`
grants everything (as before); without any key every graph is readable and nothing is writable.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from glmcot.serve.errors import error_body
from glmcot.serve.security import _send_json, is_open, presented_key

RELOAD_CHECK_S = 1.0   # how often the keys file's modification time is looked at


@dataclass(frozen=True)
class Grant:
    """What one key may do. `graphs` None: every graph, present and future."""

    name: str
    graphs: frozenset[str] | None = None
    update: bool = False
    admin: bool = False
    requests_per_minute: int | None = None

    def sees(self, graph: str) -> bool:
        return self.graphs is None or graph in self.graphs


OPEN = Grant(name="anonymous")                            # a server without keys: read everything
FULL = Grant(name="api-key", update=True, admin=True)     # the server's single --api-key
NOTHING = Grant(name="refused", graphs=frozenset())


class KeysFileError(ValueError):
    """The keys file is unreadable or malformed; the message names the entry and the field."""


def _parse_entry(position: int, entry: Any) -> tuple[str, Grant]:
    where = f"keys[{position}]"
    if not isinstance(entry, dict):
        raise KeysFileError(f"{where}: expected an object, got {type(entry).__name__}")
    known = {"name", "key", "key_sha256", "graphs", "update", "admin", "requests_per_minute"}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise KeysFileError(f"{where}: unknown field(s) {unknown}; fields: {sorted(known)}")
    name = entry.get("name") or f"key-{position}"
    if not isinstance(name, str):
        raise KeysFileError(f"{where}.name: expected a string")
    if ("key" in entry) == ("key_sha256" in entry):
        raise KeysFileError(f"{where} ({name}): give exactly one of key, key_sha256")
    if "key" in entry:
        key = entry["key"]
        if not isinstance(key, str) or len(key) < 8:
            raise KeysFileError(f"{where} ({name}).key: a string of at least 8 characters")
        digest = hashlib.sha256(key.encode()).hexdigest()
    else:
        digest = entry["key_sha256"]
        if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest.lower()):
            raise KeysFileError(f"{where} ({name}).key_sha256: 64 hexadecimal digits")
        digest = digest.lower()
    graphs = entry.get("graphs", [])
    if graphs == "*":
        allowed = None
    elif isinstance(graphs, list) and all(isinstance(g, str) for g in graphs):
        allowed = frozenset(graphs)
    else:
        raise KeysFileError(f"{where} ({name}).graphs: a list of graph names or \"*\"")
    flags = {}
    for flag in ("update", "admin"):
        value = entry.get(flag, False)
        if not isinstance(value, bool):
            raise KeysFileError(f"{where} ({name}).{flag}: true or false")
        flags[flag] = value
    rate = entry.get("requests_per_minute")
    if rate is not None and (not isinstance(rate, int) or isinstance(rate, bool) or rate < 1):
        raise KeysFileError(f"{where} ({name}).requests_per_minute: a positive integer")
    return digest, Grant(name=name, graphs=allowed, requests_per_minute=rate, **flags)


def read_keys(path: Path) -> dict[str, Grant]:
    """The keys file as {sha256 of key: grant}; KeysFileError says what is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise KeysFileError(f"cannot read the keys file {path}: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise KeysFileError(f"{path}: not JSON ({error})") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise KeysFileError(f'{path}: expected {{"keys": [...]}}')
    grants: dict[str, Grant] = {}
    names: set[str] = set()
    for position, entry in enumerate(data["keys"]):
        digest, grant = _parse_entry(position, entry)
        if digest in grants:
            raise KeysFileError(f"{path}: keys[{position}] ({grant.name}) repeats another entry's key")
        if grant.name in names:
            raise KeysFileError(f"{path}: two entries are named {grant.name!r}")
        names.add(grant.name)
        grants[digest] = grant
    return grants


class Access:
    """Who may do what: the keys file (re-read when it changes) and the server's --api-key."""

    def __init__(self, api_key: str | None = None, keys_file: Path | None = None) -> None:
        self.api_key = api_key
        self.keys_file = Path(keys_file) if keys_file is not None else None
        self._grants: dict[str, Grant] = {}
        self._stamp: tuple[int, int] | None = None
        self._checked = 0.0
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}   # grant name -> (tokens, last refill)
        if self.keys_file is not None:
            self._reload(force=True)

    @property
    def enforced(self) -> bool:
        return bool(self.api_key) or self.keys_file is not None

    def _reload(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._checked < RELOAD_CHECK_S:
            return
        self._checked = now
        try:
            info = os.stat(self.keys_file)
            stamp = (info.st_mtime_ns, info.st_size)
        except OSError:
            if force:
                raise KeysFileError(f"cannot read the keys file {self.keys_file}") from None
            return   # a file being replaced: keep the keys read last
        if stamp == self._stamp:
            return
        try:
            grants = read_keys(self.keys_file)
        except KeysFileError:
            if force:
                raise
            return   # a half-written or broken edit: keep serving with the last good keys
        self._grants, self._stamp = grants, stamp

    def grant(self, key: str | None) -> Grant | None:
        """The grant for a presented key; None: refused (missing or unknown key)."""
        if not self.enforced:
            return OPEN
        if key is None:
            return None
        if self.api_key and _same(key, self.api_key):
            return FULL
        if self.keys_file is None:
            return None
        with self._lock:
            self._reload()
            return self._grants.get(hashlib.sha256(key.encode()).hexdigest())

    def take(self, grant: Grant) -> float | None:
        """Spends one request of the grant's rate; returns None, or the seconds to wait."""
        rate = grant.requests_per_minute
        if rate is None:
            return None
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(grant.name, (float(rate), now))
            tokens = min(float(rate), tokens + (now - last) * rate / 60.0)
            if tokens < 1.0:
                self._buckets[grant.name] = (tokens, now)
                return (1.0 - tokens) * 60.0 / rate
            self._buckets[grant.name] = (tokens - 1.0, now)
            return None


def _same(a: str, b: str) -> bool:
    import hmac

    return hmac.compare_digest(a.encode(), b.encode())


GRANT_SCOPE_KEY = "glmcot_grant"


class AccessMiddleware:
    """401 without a known key, 429 past a key's rate; the grant goes on to the handlers in the
    request's scope state. /health, the trace page (and the docs when public) stay open."""

    def __init__(self, app: ASGIApp, access: Access, public_docs: bool = False) -> None:
        self.app = app
        self.access = access
        self.public_docs = public_docs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_open(scope["path"], self.public_docs):
            await self.app(scope, receive, send)
            return
        key = presented_key(scope["headers"])
        grant = self.access.grant(key)
        if grant is None:
            message = ("missing API key: send 'Authorization: Bearer <key>'" if key is None
                       else "invalid API key")
            await _send_json(send, 401, error_body(message, "authentication_error", "invalid_api_key"),
                             [(b"www-authenticate", b"Bearer")])
            return
        wait = self.access.take(grant)
        if wait is not None:
            await _send_json(send, 429, error_body(
                f"key {grant.name!r} is over its rate of {grant.requests_per_minute} requests per minute; "
                f"retry in {wait:.1f} s", "rate_limit_error", "key_rate_limited"),
                [(b"retry-after", str(max(1, math.ceil(wait))).encode())])
            return
        scope.setdefault("state", {})[GRANT_SCOPE_KEY] = grant
        await self.app(scope, receive, send)


def grant_of(scope: Scope, access: Access) -> Grant:
    """The request's grant: set by AccessMiddleware, else derived from its key (the single
    --api-key middleware already refused a wrong one)."""
    grant = (scope.get("state") or {}).get(GRANT_SCOPE_KEY)
    if grant is not None:
        return grant
    grant = access.grant(presented_key(scope["headers"]))
    return grant if grant is not None else NOTHING
