"""The trace page's Python side: events from a trace, the static page's embedding and CSP, file
names and the index. (The page in a browser: tests/serve/test_ui.py.)"""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

from glmcot.agents.records import QuestionResult
from glmcot.agents.trace import (Answer, GraphCoTStep, LLMCall, NotebookUpdate, PrefetchTiming,
                                 Reasoning, SnippetRun, UnknownEvent)
from glmcot.eval.view import (ASSET_TYPES, asset, level_tokens, live_page, page_events, page_name,
                              static_page, write_index, write_page)

HOSTILE = '</script><script>alert(1)</script>\u2028<!-- & "'


def _call(agent="reason", response=None, segments=None):
    return LLMCall(agent, {"step": 1, "attempt": 0}, "s", "h",
                   segments if segments is not None else
                   [{"level": 1, "key": None, "prompt": "reason@1", "chars": 300},
                    {"level": 2, "key": "vertex:p1", "text": "x" * 40},
                    {"level": 2, "key": None, "text": "y" * 10},
                    {"level": 4, "key": None, "text": "Question: q\n"}],
                   response or {"text": HOSTILE, "prompt_tokens": 100, "cached_tokens": 60,
                                "output_tokens": 5, "latency_s": 0.5})


def _result() -> QuestionResult:
    result = QuestionResult(qid="q/1", question=HOSTILE, answer=HOSTILE, method="glm", backend="scripted policy")
    result.trace.extend([
        _call(), Reasoning(1, 0, missing="the authors"),
        _call("act"), PrefetchTiming(1, 0, "Paper", 0.1, 0.11, 0.2, 0.3, "search"),
        SnippetRun(1, 0, "print(1)", {"ok": True, "output": "1", "follows": [["p1", "author", ["a1"]]]}),
        NotebookUpdate(["vertex:p1", "fact"]), GraphCoTStep(2, "t", "a", None),
        UnknownEvent({"type": "from-the-future"}), Answer(HOSTILE, None)])
    return result


def test_levels_count_characters_and_take_the_backends_tokens_when_reported():
    assert level_tokens(_call()) == {"1": {"chars": 300}, "2": {"chars": 50}, "4": {"chars": 12}}
    measured = _call(response={"levels": {"1": {"prompt": 70, "cached": 70}, "2": {"prompt": 20, "cached": 0}}})
    assert level_tokens(measured)["1"] == {"chars": 300, "prompt": 70, "cached": 70}
    assert level_tokens(measured)["2"] == {"chars": 50, "prompt": 20, "cached": 0}


def test_page_events_follow_the_streams_names_and_drop_unknown_events():
    events = page_events(_result(), graph="dblp", policy="scripted policy")
    names = [name for name, _ in events]
    assert names == ["start", "llm", "missing", "llm", "prefetch", "retrieval", "notebook", "step",
                     "answer", "result"]
    llm = events[1][1]
    assert "segments" not in llm and llm["levels"]["1"]["chars"] == 300 and llm["cached_tokens"] == 60
    assert events[0][1]["graph"] == "dblp" and events[-1][1]["usage"]["llm_calls"] == 0
    assert "trace" not in events[-1][1]


def test_the_static_page_embeds_hostile_text_as_inert_json():
    events = page_events(_result())
    page = static_page(events, title=HOSTILE)
    data = page.split('id="glmcot-events">', 1)[1].split("</script>", 1)[0]
    assert not re.search(r"[<>&\u2028\u2029]", data)
    assert json.loads(data) == json.loads(json.dumps(events))   # and it reads back unchanged
    assert "<title>&lt;/script&gt;" in page
    assert page.count("<script>alert(1)") == 0


def test_the_static_pages_csp_allows_exactly_its_own_scripts():
    page = static_page(page_events(_result()))
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    allowed = set(re.findall(r"'sha256-([^']+)'", policy))
    inline = re.findall(r"<script>(.*?)</script>", page, flags=re.S)
    assert len(inline) == 2   # the graph library and the view
    assert {base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() for s in inline} == allowed
    assert "connect-src 'none'" in policy and "unsafe-inline" not in policy.split("script-src")[1]
    assert "/ui/assets" not in page and "http" not in policy


def test_the_live_page_loads_its_assets_from_the_server():
    page = live_page()
    for name in ("view.js", "vendor/cytoscape-3.34.4.min.js"):
        assert f'<script src="/ui/assets/{name}"></script>' in page
    assert "glmcot-events" not in page and 'data-mode="live"' in page


def test_assets_are_only_the_named_files():
    assert set(ASSET_TYPES) == {"view.js", "view.css", "vendor/cytoscape-3.34.4.min.js"}
    assert b"Cytoscape Consortium" in asset("vendor/cytoscape-3.34.4.min.js")[:400]
    for name in ("page.html", "../view/page.py", "vendor/README.md", ""):
        with pytest.raises(KeyError):
            asset(name)


def test_the_vendored_library_keeps_its_licence_beside_it():
    from importlib import resources

    vendor = resources.files("glmcot.eval.view").joinpath("assets", "vendor")
    assert "MIT" in vendor.joinpath("README.md").read_text() and "3.34.4" in vendor.joinpath("README.md").read_text()
    assert "Permission is hereby granted" in vendor.joinpath("cytoscape-3.34.4.LICENSE.txt").read_text()


def test_page_names_and_the_index_are_safe(tmp_path):
    assert page_name("dblp/0 <x>", 3) == "dblp_0__x_.html"
    assert page_name("../../etc", 3) == "_.._etc.html"
    assert page_name(None, 7) == "question-7.html"
    path = write_index(tmp_path, [('a".html', HOSTILE, HOSTILE)], HOSTILE)
    text = path.read_text()
    assert "<script>alert" not in text and 'href="a&quot;.html"' in text


def test_write_page_is_atomic_and_creates_its_folder(tmp_path):
    path = write_page(tmp_path / "deep" / "q.html", page_events(_result()))
    assert path.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in path.parent.iterdir()] == ["q.html"]
