"""Recorded question traces loaded back as per-session call sequences (the codesign replay)."""

from __future__ import annotations

import json

import pytest

from glmcot.agents import ScriptedBackend, run_questions
from glmcot.agents.call_traces import TraceError, load_recorded_sessions
from glmcot.agents.prompts import load_prompts
from glmcot.llm.replay import prompt_hash
from glmcot.llm.types import join_segments


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, context, records):
    folder = tmp_path_factory.mktemp("traces")
    backend = ScriptedBackend(records, code_runner=context.run_code)
    run_questions(records, method="glm", backend=backend, context=context, traces=folder / "glm.jsonl", resume=False)
    run_questions(records, method="graphcot", backend=backend, context=context, traces=folder / "graphcot.jsonl", resume=False)
    return folder


def test_sessions_rebuild_every_prompt_the_agent_sent(recorded, records):
    sessions = load_recorded_sessions([recorded])  # the folder: both files, GLM questions only
    assert sorted(s.qid for s in sessions) == sorted(r["qid"] for r in records)  # file order: as they finished
    assert {s.method for s in sessions} == {"glm"}
    rows = {json.loads(line)["qid"]: json.loads(line) for line in (recorded / "glm.jsonl").read_text().splitlines()}
    prompts = load_prompts("dblp")
    shared = {prompts.classify, prompts.classify_plan, prompts.reason, prompts.act}
    for session in sessions:
        events = [e for e in rows[session.qid]["trace"] if e["type"] == "llm"]
        assert [c.agent for c in session.calls] == [e["agent"] for e in events]
        for call, event in zip(session.calls, events):
            assert prompt_hash(join_segments(call.segments)) == event["prompt_sha"]
            assert call.response == event["response"]["text"]
            assert call.segments[0].level == 1 and call.segments[0].text in shared
    keyed = [s.key for session in sessions for call in session.calls for s in call.segments if s.key]
    assert keyed and all(key.startswith("vertex:") for key in keyed)  # the multi-step questions read vertex chunks
    graphcot = load_recorded_sessions([recorded / "graphcot.jsonl"], methods=("graphcot",))
    assert len(graphcot) == len(records) and all(s.method == "graphcot" for s in graphcot)


def test_a_torn_last_line_is_skipped_and_other_damage_is_named(recorded, tmp_path):
    lines = (recorded / "glm.jsonl").read_text().splitlines()
    torn = tmp_path / "torn.jsonl"
    torn.write_text("\n".join(lines) + '\n{"qid": "t-9", "tra')
    assert len(load_recorded_sessions([torn])) == len(lines)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([lines[0], "not json", *lines[1:]]) + "\n")
    with pytest.raises(TraceError, match=r"broken\.jsonl:2: not JSON"):
        load_recorded_sessions([broken])
    changed = tmp_path / "changed.jsonl"
    row = json.loads(lines[0])
    llm = next(e for e in row["trace"] if e["type"] == "llm")
    llm["segments"][0]["prompt"] = llm["segments"][0]["prompt"].split("@")[0] + "@000000000000"
    changed.write_text(json.dumps(row) + "\n")
    with pytest.raises(TraceError, match="record the traces again"):
        load_recorded_sessions([changed])
    edited = tmp_path / "edited.jsonl"
    row = json.loads(lines[0])
    llm = next(e for e in row["trace"] if e["type"] == "llm")
    llm["segments"][-1]["text"] += "edited"
    edited.write_text(json.dumps(row) + "\n")
    with pytest.raises(TraceError, match="differs from the recorded one"):
        load_recorded_sessions([edited])
    with pytest.raises(FileNotFoundError, match="no traces file or folder"):
        load_recorded_sessions([tmp_path / "missing.jsonl"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match="no \\*.jsonl traces"):
        load_recorded_sessions([tmp_path / "empty"])


def _benchmark(name: str):
    import importlib

    return importlib.import_module(f"glmcot.benchmarks.{name}")


@pytest.mark.timeout(2400)  # real decoding of every recorded call in five arm runs: slow on a loaded machine
def test_codesign_replays_recorded_sessions_through_the_engine(recorded, records, tmp_path):
    """glmcot.benchmarks.codesign --traces: every recorded GLM call is force-decoded through the
    engine in each arm, and the sweep reports cache behaviour per pool size."""
    codesign = _benchmark("codesign")
    out = tmp_path / "codesign.json"
    assert codesign.main(["--traces", str(recorded), "--no-fidelity", "--kv-tokens", "4096", "--concurrency", "2",
                          "--arms", "lru+facts", "lru", "--control", "lru", "--threads", "2",
                          "--repeats", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["version"] == 4 and "--kv-tokens 4096" in result["command"] and result["date"]
    calls = sum(len(s.calls) for s in load_recorded_sessions([recorded]))
    assert result["workload"]["synthetic"] is False and result["workload"]["sessions"] == len(records)
    ceiling = result["workload"]["reuse_ceiling"]
    assert 0 <= ceiling["cross_session_chunk_share"] <= ceiling["chunk_share"] < 1
    assert ceiling["chunks_in_several_sessions"] <= ceiling["distinct_chunks"]
    for arm in ("lru+facts", "lru", "lru (A/A)"):
        row = result["arms"][arm]
        assert row["sessions"] == len(records) and row["calls"] == calls and row["sessions_too_long"] == 0
        assert 0 < row["hit_rate"] < 1 and row["prefill_tokens_computed"] < row["prompt_tokens_queried"]
        assert 0 < row["prefill_steps_s"] <= row["wall_s"]
    # The control copy does exactly the work of the arm it repeats; only its time may differ.
    same = ("hit_rate", "prefill_tokens_computed", "steps", "generated_tokens", "evictions")
    assert {k: result["arms"]["lru (A/A)"][k] for k in same} == {k: result["arms"]["lru"][k] for k in same}
    assert isinstance(result["ours_wall"]["control_throughput_pct"], float)
    assert result["ours_wall"]["vertex_hit_points"] is None  # lru+chunks did not run
    assert result["ours_wall"]["vertex_centric_hit_points"] is None
    # Repeats create the engines in a rotated order, so no arm always gets the first KV pool.
    assert [[r["created"] for r in result["all_runs"][arm]] for arm in ("lru+facts", "lru")] == [[0, 2], [1, 0]]
    facts, chunks = result["arms"]["lru+facts"], result["arms"]["lru"]
    assert facts["notebook"] == "facts" and chunks["notebook"] == "vertex chunks"
    assert facts["calls"] == calls and facts["chunk_hit_tokens"] == 0
    # The same text in another order: the prompts cost about the same tokens.
    assert abs(facts["prompt_tokens_queried"] / chunks["prompt_tokens_queried"] - 1) < 0.02
    assert result["ours_wall"]["unit_hit_points"] == pytest.approx((chunks["hit_rate"] - facts["hit_rate"]) * 100)
    # Per repeat, each effect pairs the arms of that repeat's lock-step run.
    runs, paired = result["all_runs"], result["ours_wall_per_repeat"]
    assert paired["unit_hit_points"] == pytest.approx(
        [(c["hit_rate"] - f["hit_rate"]) * 100 for f, c in zip(runs["lru+facts"], runs["lru"])])
    assert paired["control_throughput_pct"] == pytest.approx(
        [(b["throughput_sessions_per_s"] / a["throughput_sessions_per_s"] - 1) * 100 for a, b in zip(runs["lru"], runs["lru (A/A)"])])
    assert "vertex_hit_points" not in paired  # lru+chunks did not run
    sweep = _benchmark("codesign_sweep")
    out = tmp_path / "sweep.json"
    assert sweep.main(["--traces", str(recorded), "--kv-tokens", "4096", "16384", "--concurrency", "2",
                       "--arms", "lru+chunks", "glm-paper+chunks", "glm+chunks", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    small = {r["arm"]: r for r in result["rows"] if r["kv_pool_tokens"] == 4096}
    large = {r["arm"]: r for r in result["rows"] if r["kv_pool_tokens"] == 16384}
    for arm in small:  # a larger pool never loses hits on the same schedule
        assert large[arm]["hit_rate"] >= small[arm]["hit_rate"]
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert [e["kv_pool_tokens"] for e in result["effects"]] == [4096, 16384]
    for effect in result["effects"]:  # both forms of priority eviction against lru+chunks, from the rows
        at = {r["arm"]: r for r in result["rows"] if r["kv_pool_tokens"] == effect["kv_pool_tokens"]}
        for key, arm in (("priority_miss_pct", "glm+chunks"), ("priority_paper_miss_pct", "glm-paper+chunks")):
            expected = ((1 - at[arm]["hit_rate"]) / (1 - at["lru+chunks"]["hit_rate"]) - 1) * 100
            assert effect[key] == pytest.approx(expected)


def test_reuse_ceiling_counts_chunks_a_later_session_reads_again():
    from glmcot.engine import Segment

    codesign, workload = _benchmark("codesign"), _benchmark("codesign.workload")
    shared, own = Segment("A" * 30, 2, "vertex:a"), Segment("B" * 10, 2, "vertex:b")
    first = workload.Session("q1", [workload.Call("R", [Segment("P" * 40, 1), shared, own], ""),
                                    workload.Call("R", [Segment("P" * 40, 1), shared, own], "")])  # its own re-read
    second = workload.Session("q2", [workload.Call("R", [Segment("P" * 40, 1), shared, Segment("Q" * 20, 4)], "")])
    ceiling = workload.reuse_ceiling([first, second])
    total = 80 + 80 + 90
    assert ceiling == {"chunk_share": (40 + 40 + 30) / total, "cross_session_chunk_share": 30 / total,
                       "distinct_chunks": 2, "chunks_in_several_sessions": 1}
    with pytest.raises(SystemExit):
        codesign.main(["--arms", "lru", "--control", "glm+chunks", "--quick"])  # the control must repeat an arm that runs


def test_fact_notebook_keeps_the_text_but_not_the_order():
    """The paper's fact-unit baseline: the notebook's chunks cut into single facts, listed by a
    fixed score; a new fact can land before older ones, so the old notebook is no prefix."""
    from glmcot.engine import Segment

    workload = _benchmark("codesign.workload")
    head, question = Segment("P" * 40, 1), Segment("Question: which?\n", 4)
    title = Segment("Notebook:\n", 2)
    first = Segment("[node 1 | paper]\ntitle: Graphs\nyear: 2001\n", 2, "vertex:1")
    block = Segment('<fact n="1">\nFound:\nGraphs\n</fact>\n', 2)
    second = Segment("".join(f"[node 2 | author]\nname: A{i}\n" if i == 0 else f"paper {i}: P{i}\n" for i in range(12)),
                     2, "vertex:2")
    before = workload.fact_notebook([head, title, first, block, question])
    after = workload.fact_notebook([head, title, first, block, second, question])
    assert [s.level for s in before] == [1, 2, 4] and before[0] is head and before[2] is question
    assert all(s.key is None for s in before + after)
    old, new = before[1].text, after[1].text
    assert old.startswith("Notebook:\n") and new.startswith("Notebook:\n")
    assert block.text in old and block.text in new  # a fact block stays whole
    lines = first.text.splitlines(keepends=True)
    assert sorted(old.replace(block.text, "").splitlines(keepends=True)) == sorted(["Notebook:\n", *lines])
    assert len(new) == len(title.text + first.text + block.text + second.text)  # nothing added or dropped
    units = [*lines, block.text]
    assert sorted(units, key=new.index) == sorted(units, key=old.index)  # older facts keep their order
    assert not new.startswith(old)  # ... but new ones land among them: no prefix hit on the old notebook
    assert workload.fact_notebook([head, question]) == [head, question]
