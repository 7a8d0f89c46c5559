"""FalkorDB behind the seam: a `CypherRunner` over the `falkordb` client, and the URL form
``falkordb://HOST:PORT/GRAPH`` (graph/live/cypher_source.py has the queries and the layout)."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from glmcot.graph.live.cypher_source import CypherSource
from glmcot.graph.graph_source import SourceUnavailable

URL_PATTERN = re.compile(r"^falkordb:/{1,2}(?P<host>[^/:]+)(?::(?P<port>\d+))?/(?P<graph>[A-Za-z0-9_.\-]+)/?$")
GRAPH_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


@dataclass(frozen=True)
class FalkorLocation:
    host: str
    port: int
    graph: str

    @property
    def url(self) -> str:
        return f"falkordb://{self.host}:{self.port}/{self.graph}"

    @classmethod
    def parse(cls, location: str) -> FalkorLocation:
        """`falkordb://HOST:PORT/GRAPH` (one slash after the scheme is accepted too: a URL that
        went through a path option)."""
        match = URL_PATTERN.match(str(location))
        if not match:
            raise ValueError(f"not a FalkorDB location: {location!r}; expected falkordb://HOST:PORT/GRAPH "
                             "(graph names: letters, digits, _ . -)")
        return cls(match["host"], int(match["port"] or 6379), match["graph"])


def is_falkordb(location: Any) -> bool:
    return str(location).startswith("falkordb:")


class FalkorRunner:
    """Runs Cypher on one FalkorDB graph; connection failures become SourceUnavailable naming the URL.
    The client's pool is thread-safe; reconnecting after the database comes back is the client's."""

    def __init__(self, location: FalkorLocation, timeout: float = 10.0):
        try:
            import falkordb
            import redis
        except ImportError:
            raise SourceUnavailable("FalkorDB sources need the falkordb client: pip install 'glmcot[graphdb]'") from None
        self.location = location
        self._errors = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, ConnectionError, OSError)
        self._response_error = redis.exceptions.ResponseError
        self._lock = threading.Lock()
        try:
            self.db = falkordb.FalkorDB(host=location.host, port=location.port, socket_timeout=timeout,
                                        socket_connect_timeout=timeout)
            self.graph = self.db.select_graph(location.graph)
            self.db.connection.ping()
        except self._errors as error:
            raise SourceUnavailable(f"cannot reach FalkorDB at {location.url}: {error}") from None

    def run(self, query: str, parameters: dict[str, Any] | None = None) -> list[list[Any]]:
        try:
            return self.graph.query(query, parameters).result_set
        except self._errors as error:
            raise SourceUnavailable(f"FalkorDB at {self.location.url} is unreachable: {error}") from None
        except self._response_error as error:
            if "empty key" in str(error).lower() or "invalid graph operation on empty key" in str(error).lower():
                return []  # the graph does not exist (yet): no rows
            raise

    def write(self, query: str, parameters: dict[str, Any] | None = None) -> list[list[Any]]:
        return self.run(query, parameters)

    def exists(self) -> bool:
        try:
            return self.location.graph in self.db.list_graphs()
        except self._errors as error:
            raise SourceUnavailable(f"cannot reach FalkorDB at {self.location.url}: {error}") from None

    def delete(self) -> None:
        if self.exists():
            self.graph.delete()

    def close(self) -> None:
        try:
            self.db.connection.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass


def open_falkordb(location: str) -> CypherSource:
    parsed = FalkorLocation.parse(location)
    runner = FalkorRunner(parsed)
    try:
        return CypherSource(runner, parsed.url)
    except BaseException:
        runner.close()
        raise


__all__ = ["FalkorLocation", "FalkorRunner", "open_falkordb", "is_falkordb"]
