"""`GET /ui`: the trace page (glmcot.eval.view), live over `POST /v1/ask`'s SSE stream.

The page and its assets hold no secret and need no API key (security.OPEN_PREFIXES); the page
asks for the key once, keeps it in the tab's sessionStorage and sends it as an Authorization
header on its API calls (fetch streaming: EventSource cannot send headers).
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from glmcot.eval import view
from glmcot.serve import errors

router = APIRouter(tags=["Trace page"])
HEADERS = {"Content-Security-Policy": view.page.LIVE_CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}


@router.get("/ui", response_class=HTMLResponse)
async def page() -> HTMLResponse:
    """Pick a graph and a method, ask, and watch the agents: calls with cache bars by level,
    snippets, notebook, the subgraph drawn, and the pipelined retrieval timeline."""
    return HTMLResponse(view.live_page(), headers=HEADERS)


@router.get("/ui/assets/{name:path}", include_in_schema=False)
async def assets(name: str) -> Response:
    try:
        body = view.asset(name)
    except KeyError:
        raise errors.not_found(f"no page asset {name!r}") from None
    return Response(body, media_type=view.ASSET_TYPES[name], headers=HEADERS)
