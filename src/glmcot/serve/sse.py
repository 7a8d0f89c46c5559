"""Server-Sent Events framing."""

from __future__ import annotations

import json
from typing import Any

MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def event(data: Any, name: str | None = None, id: str | int | None = None) -> str:
    """One event: optional `event:` and `id:` lines, a JSON `data:` line, a blank line."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False,
                                                           separators=(",", ":"))
    lines = []
    if name:
        lines.append(f"event: {name}")
    if id is not None:
        lines.append(f"id: {id}")
    # JSON has no raw newlines, but a str payload might: each line needs its own data: prefix
    lines += [f"data: {line}" for line in payload.split("\n")]
    return "\n".join(lines) + "\n\n"


DONE = "data: [DONE]\n\n"


def parse(stream_text: str) -> list[dict[str, Any]]:
    """Parses SSE text into [{"event": name|None, "data": str}] (clients, tests, benchmarks)."""
    events = []
    for block in stream_text.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])
        events.append({"event": name, "data": "\n".join(data)})
    return events
