"""Prometheus text exposition (format 0.0.4), written by hand: counters, gauges, histograms.

Request-side figures are recorded as requests finish; engine and cache figures are read from
their owners' `stats()` at scrape time, so they are never stale and never double counted.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                   120.0, 300.0)

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels, extra: Labels = ()) -> str:
    items = labels + extra
    if not items:
        return ""
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in items) + "}"


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def sanitize(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else "_" + out


class _Metric:
    kind = "untyped"

    def __init__(self, name: str, help: str, label_names: Iterable[str] = ()) -> None:
        self.name = name
        self.help = help
        self.label_names = tuple(label_names)
        self._lock = threading.Lock()

    def _key(self, labels: Mapping[str, Any]) -> Labels:
        if set(labels) != set(self.label_names):
            raise ValueError(f"{self.name} takes labels {self.label_names}, got {tuple(labels)}")
        return tuple((name, str(labels[name])) for name in self.label_names)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]


class Counter(_Metric):
    kind = "counter"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.values: dict[Labels, float] = {}

    def inc(self, amount: float = 1.0, **labels: Any) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        key = self._key(labels)
        with self._lock:
            self.values[key] = self.values.get(key, 0.0) + amount

    def get(self, **labels: Any) -> float:
        return self.values.get(self._key(labels), 0.0)

    def render(self) -> list[str]:
        with self._lock:
            items = sorted(self.values.items())
        return self.header() + [f"{self.name}{_labels(k)} {_number(v)}" for k, v in items]


class Gauge(Counter):
    kind = "gauge"

    def set(self, value: float, **labels: Any) -> None:
        key = self._key(labels)
        with self._lock:
            self.values[key] = float(value)

    def inc(self, amount: float = 1.0, **labels: Any) -> None:
        key = self._key(labels)
        with self._lock:
            self.values[key] = self.values.get(key, 0.0) + amount

    def dec(self, amount: float = 1.0, **labels: Any) -> None:
        self.inc(-amount, **labels)


class Histogram(_Metric):
    kind = "histogram"

    def __init__(self, name: str, help: str, label_names: Iterable[str] = (),
                 buckets: Iterable[float] = LATENCY_BUCKETS) -> None:
        super().__init__(name, help, label_names)
        self.buckets = tuple(sorted(buckets)) + (math.inf,)
        self.series: dict[Labels, list[float]] = {}   # bucket counts..., sum, count

    def observe(self, value: float, **labels: Any) -> None:
        key = self._key(labels)
        with self._lock:
            row = self.series.setdefault(key, [0.0] * (len(self.buckets) + 2))
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    row[i] += 1
            row[-2] += value
            row[-1] += 1

    def count(self, **labels: Any) -> float:
        row = self.series.get(self._key(labels))
        return row[-1] if row else 0.0

    def render(self) -> list[str]:
        lines = self.header()
        with self._lock:
            items = sorted((k, list(v)) for k, v in self.series.items())
        for key, row in items:
            for bound, count in zip(self.buckets, row):
                lines.append(f"{self.name}_bucket{_labels(key, (('le', _number(bound)),))} "
                             f"{_number(count)}")
            lines.append(f"{self.name}_sum{_labels(key)} {_number(row[-2])}")
            lines.append(f"{self.name}_count{_labels(key)} {_number(row[-1])}")
        return lines


def flatten_stats(prefix: str, stats: Mapping[str, Any] | list[tuple[Labels, Mapping[str, Any]]],
                  help: str) -> list[str]:
    """Renders nested stats dicts as gauges.

    ``{"evictions": {"1": 3, "2": 0}}`` under prefix ``glmcot_engine`` becomes
    ``glmcot_engine_evictions{key="1"} 3``: the innermost dict's keys (levels, kinds) become a
    label; deeper levels join the name. Non-numeric leaves are skipped. Several sources may be
    given as (labels, stats) pairs; each series then carries its source's labels.
    """
    sources = stats if isinstance(stats, list) else [((), stats)]
    series: dict[str, list[tuple[Labels, float]]] = {}

    def walk(base: Labels, path: list[str], value: Any) -> None:
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, (int, float)):
            series.setdefault(sanitize("_".join([prefix, *path])), []).append((base, value))
        elif isinstance(value, Mapping):
            leaves = {k: v for k, v in value.items() if isinstance(v, (int, float))}
            if path and leaves and len(leaves) == len(value):
                name = sanitize("_".join([prefix, *path]))
                for k, v in leaves.items():
                    series.setdefault(name, []).append((base + (("key", str(k)),), float(v)))
            else:
                for k, v in value.items():
                    walk(base, [*path, str(k)], v)

    for base, source in sources:
        walk(tuple(base), [], source)
    lines: list[str] = []
    for name in sorted(series):
        lines.append(f"# HELP {name} {help}")
        lines.append(f"# TYPE {name} gauge")
        for labels, value in series[name]:
            lines.append(f"{name}{_labels(labels)} {_number(float(value))}")
    return lines


class ServerMetrics:
    """The server's metric set, plus collectors read at scrape time."""

    def __init__(self, policy: str, model: str) -> None:
        self.info = Gauge("glmcot_server_info", "Constant 1; labels say how the server answers.",
                          ("policy", "model"))
        self.info.set(1, policy=policy, model=model)
        self.requests = Counter("glmcot_requests_total", "HTTP requests finished.",
                                ("endpoint", "status"))
        self.latency = Histogram("glmcot_request_duration_seconds",
                                 "Arrival to last byte, per endpoint.", ("endpoint",))
        self.in_flight = Gauge("glmcot_requests_in_flight", "Requests holding a slot.", ())
        self.waiting = Gauge("glmcot_requests_waiting", "Requests waiting for a slot.", ())
        self.rejected = Gauge("glmcot_requests_rejected_total",
                              "Requests refused by admission control, by reason.", ("reason",))
        self.rejected.kind = "counter"
        self.tokens = Counter("glmcot_tokens_total", "Tokens, by endpoint and kind "
                              "(prompt, cached, output).", ("endpoint", "kind"))
        self.ttft = Histogram("glmcot_time_to_first_token_seconds",
                              "Streaming requests: arrival to first token.", ("endpoint",))
        self.questions = Counter("glmcot_questions_total", "Questions answered by /v1/ask.",
                                 ("graph", "method", "policy", "outcome"))
        self.question_latency = Histogram("glmcot_question_duration_seconds",
                                          "Agent time per question.", ("graph", "method"))
        self.llm_calls = Counter("glmcot_question_llm_calls_total", "LLM calls made by agents.",
                                 ("graph", "method"))
        self.collectors: list[Callable[[], list[str]]] = []

    def render(self, *admissions) -> str:
        """`admissions`: the server's admission lanes (questions, engine requests), summed."""
        if admissions:
            self.in_flight.set(sum(admission.running for admission in admissions))
            self.waiting.set(sum(admission.waiting for admission in admissions))
            for reason in admissions[0].rejected:
                self.rejected.set(sum(admission.rejected.get(reason, 0) for admission in admissions),
                                  reason=reason)
        lines: list[str] = []
        for metric in (self.info, self.requests, self.latency, self.in_flight, self.waiting,
                       self.rejected, self.tokens, self.ttft, self.questions,
                       self.question_latency, self.llm_calls):
            lines += metric.render()
        for collect in self.collectors:
            try:
                lines += collect()
            except Exception as exc:  # a failing collector must not break the scrape
                lines.append(f"# collector error: {type(exc).__name__}")
        return "\n".join(lines) + "\n"
