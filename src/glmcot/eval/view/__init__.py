"""A question's trace as a web page: the agent calls with their cache bars by priority level, the
snippets, the notebook, the subgraph drawn with the vendored cytoscape.js, and the pipelined
retrieval timeline. `glmcot serve` serves it live at /ui (glmcot.serve.ui); `glmcot ask --html`
and `glmcot eval --html` write it as one static page per question."""

from glmcot.eval.view.events import level_tokens, llm_view, page_events
from glmcot.eval.view.page import (ASSET_TYPES, asset, live_page, page_name, static_page, write_index,
                                   write_page)

__all__ = ["ASSET_TYPES", "asset", "level_tokens", "live_page", "llm_view", "page_events", "page_name",
           "static_page", "write_index", "write_page"]
