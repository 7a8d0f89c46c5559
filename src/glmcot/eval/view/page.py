"""The trace page's HTML: live (served at /ui, assets by URL) or static (one file, everything
inlined, the question's events embedded as JSON).

Every text on the page comes from the trace (the question, LLM replies, node texts) and is
untrusted: the script only ever sets it as text, the embedded JSON is escaped so it cannot close
its <script> element, and a Content-Security-Policy lets only the page's own scripts run.
"""

from __future__ import annotations

import base64
import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

from glmcot.files import write_text_atomic

CYTOSCAPE = "vendor/cytoscape-3.34.4.min.js"
ASSET_TYPES = {"view.js": "text/javascript; charset=utf-8", "view.css": "text/css; charset=utf-8",
               CYTOSCAPE: "text/javascript; charset=utf-8"}
SCRIPTS = (CYTOSCAPE, "view.js")
# The live page: its own scripts, styles and API calls only. Cytoscape sets element styles from
# script, which style-src 'unsafe-inline' allows (styles cannot run code).
LIVE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
            "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")


def asset(name: str) -> bytes:
    """One of the page's files (ASSET_TYPES names them all); KeyError for anything else."""
    if name not in ASSET_TYPES:
        raise KeyError(name)
    return resources.files("glmcot.eval.view").joinpath("assets", *name.split("/")).read_bytes()


def _template() -> str:
    return asset_text("page.html")


def asset_text(name: str) -> str:
    return resources.files("glmcot.eval.view").joinpath("assets", name).read_text(encoding="utf-8")


def _json_for_script(data: Any) -> str:
    """JSON that is safe inside <script type="application/json">: no '<' (so no '</script>'),
    '>' or '&' and no line separators appear literally."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def live_page() -> str:
    """The page /ui serves: a form to ask, and the view filled from the SSE stream."""
    scripts = "\n".join(f'<script src="/ui/assets/{name}"></script>' for name in SCRIPTS)
    return (_template().replace("{{CSP}}", "").replace("{{MODE}}", "live")
            .replace("{{TITLE}}", "glmcot: see the agents think")
            .replace("{{STYLE}}", '<link rel="stylesheet" href="/ui/assets/view.css">')
            .replace("{{DATA}}", "").replace("{{SCRIPTS}}", scripts))


def static_page(events: list[list[Any]], title: str = "glmcot trace") -> str:
    """One self-contained page (no server, no network) showing `events` (page_events)."""
    scripts = [asset(name).decode("utf-8") for name in SCRIPTS]
    # a script's text must not hold "</script": the vendored and own scripts do not, checked here
    for name, text in zip(SCRIPTS, scripts):
        if "</script" in text.lower():
            raise ValueError(f"{name} cannot be inlined: it holds '</script'")
    csp = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
           "form-action 'none'; connect-src 'none'; script-src " + " ".join(_sha256(t) for t in scripts))
    from html import escape

    policy = escape(csp, quote=False)   # it holds single quotes, never double ones
    return (_template()
            .replace("{{CSP}}", f'<meta http-equiv="Content-Security-Policy" content="{policy}">')
            .replace("{{MODE}}", "static").replace("{{TITLE}}", escape(title))
            .replace("{{STYLE}}", "<style>\n" + asset_text("view.css") + "\n</style>")
            .replace("{{DATA}}", '<script type="application/json" id="glmcot-events">'
                     + _json_for_script(events) + "</script>")
            .replace("{{SCRIPTS}}", "\n".join(f"<script>{text}</script>" for text in scripts)))


def write_page(path: Path, events: list[list[Any]], title: str = "glmcot trace") -> Path:
    """Writes static_page(events) to path atomically; returns path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, static_page(events, title))
    return path


def page_name(qid: str | None, number: int) -> str:
    """A file name for a question's page: its id with anything but letters, digits, '-', '_'
    and '.' replaced (ids come from question files), or its number."""
    import re

    stem = re.sub(r"[^A-Za-z0-9._-]", "_", str(qid or ""))[:100].lstrip(".") or f"question-{number}"
    return stem + ".html"


def write_index(folder: Path, pages: list[tuple[str, str, str]], title: str) -> Path:
    """folder/index.html linking each (file name, question, answer) page; every text escaped."""
    from html import escape

    rows = "\n".join(f'<li><a href="{escape(name)}">{escape(name)}</a>: {escape(question[:300])} '
                     f"<b>{escape(answer[:200])}</b></li>" for name, question, answer in pages)
    text = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"Content-"
            "Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<title>{escape(title)}</title></head><body><h1>{escape(title)}</h1><ol>{rows}</ol></body></html>\n")
    path = Path(folder) / "index.html"
    write_text_atomic(path, text)
    return path
