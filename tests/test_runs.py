"""The one resumable runner (glmcot.runs) and the crash-safe files it writes (glmcot.files)."""

import json
import threading

import pytest

from glmcot.files import RowWriter, read_rows, write_json_atomic, write_rows_atomic
from glmcot.runs import RunInterrupted, Storage, run_resumable

STORAGE = Storage(encode=lambda item, result: {"qid": item, "value": result}, decode=lambda row: row["value"])


def test_results_come_back_in_item_order_and_are_stored(tmp_path):
    path = tmp_path / "run.jsonl"
    outcome = run_resumable(["a", "b", "c", "d"], str.upper, item_key=str, storage=STORAGE, path=path, concurrency=3)
    assert outcome.results == ["A", "B", "C", "D"] and (outcome.new, outcome.skipped) == (4, 0)
    assert sorted(row["qid"] for row in read_rows(path)) == ["a", "b", "c", "d"]


def test_a_rerun_skips_stored_items_and_retries_the_ones_asked(tmp_path):
    path = tmp_path / "run.jsonl"
    write_rows_atomic(path, [{"qid": "a", "value": "stored"}, {"qid": "b", "value": "failed"}])
    storage = Storage(encode=STORAGE.encode, decode=STORAGE.decode, retry=lambda row: row["value"] == "failed")
    answered, skipped, stored = [], [], []
    outcome = run_resumable(["a", "b", "c"], lambda item: answered.append(item) or item * 2, item_key=str, storage=storage,
                            path=path, on_start=skipped.append, on_stored=stored.append)
    assert outcome.results == ["stored", "bb", "cc"] and sorted(answered) == ["b", "c"]
    assert skipped == [1] and stored == ["stored"]
    rows = read_rows(path)
    assert sorted((row["qid"], row["value"]) for row in rows) == [("a", "stored"), ("b", "bb"), ("c", "cc")]


def test_rows_of_other_runs_are_kept_and_not_reused(tmp_path):
    path = tmp_path / "run.jsonl"
    write_rows_atomic(path, [{"qid": "a", "value": "other", "method": "x"}])
    storage = Storage(encode=lambda item, result: {"qid": item, "value": result, "method": "y"},
                      decode=STORAGE.decode, belongs=lambda row: row.get("method") == "y")
    outcome = run_resumable(["a"], str.upper, item_key=str, storage=storage, path=path)
    assert outcome.results == ["A"] and len(read_rows(path)) == 2


def test_items_without_a_key_always_run(tmp_path):
    path = tmp_path / "run.jsonl"
    for _ in range(2):
        outcome = run_resumable([None], lambda item: "x", item_key=lambda item: None, storage=STORAGE, path=path)
        assert outcome.new == 1


def test_an_exception_in_answer_is_raised_and_keeps_what_was_stored(tmp_path):
    path = tmp_path / "run.jsonl"

    def answer(item):
        if item == "bad":
            raise RuntimeError("boom")
        return item

    with pytest.raises(RuntimeError, match="boom"):
        run_resumable(["ok", "bad"], answer, item_key=str, storage=STORAGE, path=path, concurrency=1)
    assert [row["qid"] for row in read_rows(path)] == ["ok"]


def test_ctrl_c_raises_run_interrupted_with_what_was_saved(tmp_path):
    path = tmp_path / "run.jsonl"
    release = threading.Event()

    def answer(item):
        if item != "first":
            release.wait(10)
        return item

    def interrupt(result):
        raise KeyboardInterrupt

    try:
        with pytest.raises(RunInterrupted) as stopped:
            run_resumable(["first", "second", "third"], answer, item_key=str, storage=STORAGE, path=path, name="glm",
                          concurrency=3, on_done=interrupt)
    finally:
        release.set()
    assert (stopped.value.name, stopped.value.saved, stopped.value.total) == ("glm", 1, 3)
    assert "1 of 3 answers saved" in str(stopped.value)


def test_a_torn_last_line_is_cut_and_a_malformed_middle_line_is_named(tmp_path):
    path = tmp_path / "rows.jsonl"
    with RowWriter(path) as writer:
        writer.write({"qid": "a"})
    with open(path, "a") as handle:
        handle.write('{"qid": "b", "ans')
    assert read_rows(path) == [{"qid": "a"}]
    assert path.read_text() == '{"qid": "a"}\n'
    path.write_text('{"qid": "a"}\n[1, 2]\n{"qid": "c"}\n')
    with pytest.raises(ValueError, match=r"rows.jsonl:2: malformed"):
        read_rows(path)


def test_json_is_replaced_whole(tmp_path):
    path = tmp_path / "deep" / "state.json"
    write_json_atomic(path, {"b": 1, "a": [1, 2]}, indent=None, sort_keys=True)
    assert json.loads(path.read_text()) == {"a": [1, 2], "b": 1} and path.read_text().startswith('{"a"')
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]
