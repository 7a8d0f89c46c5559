"""The keys file: what each entry grants, the errors a malformed file gets (naming the entry and
the field), rates, and edits picked up while serving (a broken edit keeps the last good keys)."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from glmcot.serve import keys
from glmcot.serve.keys import FULL, OPEN, Access, KeysFileError, read_keys


def write(path, entries):
    path.write_text(json.dumps({"keys": entries}))
    return path


def test_grants(tmp_path):
    digest = hashlib.sha256(b"hashed-key-001").hexdigest()
    path = write(tmp_path / "keys.json", [
        {"name": "reader", "key": "reader-key-001", "graphs": ["dblp"]},
        {"name": "ops", "key_sha256": digest.upper(), "graphs": "*", "update": True, "admin": True}])
    access = Access(keys_file=path)
    reader = access.grant("reader-key-001")
    assert reader.sees("dblp") and not reader.sees("other") and not reader.update and not reader.admin
    ops = access.grant("hashed-key-001")
    assert ops.sees("anything") and ops.update and ops.admin
    assert access.grant("unknown-key-01") is None and access.grant(None) is None
    # the server's --api-key beside a keys file still grants everything
    assert Access(api_key="the-api-key", keys_file=path).grant("the-api-key") is FULL
    assert Access().grant(None) is OPEN and not OPEN.update and not OPEN.admin


@pytest.mark.parametrize("entries, needle", [
    ([{"name": "a"}], "keys[0] (a): give exactly one of key, key_sha256"),
    ([{"key": "short"}], "key: a string of at least 8 characters"),
    ([{"key_sha256": "abc"}], "64 hexadecimal digits"),
    ([{"key": "long-enough-1", "graphs": "dblp"}], 'graphs: a list of graph names or "*"'),
    ([{"key": "long-enough-1", "update": "yes"}], "update: true or false"),
    ([{"key": "long-enough-1", "requests_per_minute": 0}], "requests_per_minute: a positive integer"),
    ([{"key": "long-enough-1", "graph": ["x"]}], "unknown field(s) ['graph']"),
    ([{"key": "long-enough-1"}, {"key": "long-enough-1"}], "repeats another entry's key"),
    ([{"name": "x", "key": "long-enough-1"}, {"name": "x", "key": "long-enough-2"}], "two entries are named 'x'"),
    (["a key"], "keys[0]: expected an object"),
])
def test_malformed_files_say_what_is_wrong(tmp_path, entries, needle):
    with pytest.raises(KeysFileError) as error:
        read_keys(write(tmp_path / "keys.json", entries))
    assert needle in str(error.value)


def test_unreadable_and_non_json_files(tmp_path):
    with pytest.raises(KeysFileError, match="cannot read the keys file"):
        Access(keys_file=tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(KeysFileError, match="not JSON"):
        read_keys(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(KeysFileError, match='expected {"keys": \\[...\\]}'):
        read_keys(tmp_path / "list.json")


def test_rates_are_per_key(tmp_path):
    access = Access(keys_file=write(tmp_path / "keys.json", [
        {"name": "slow", "key": "slow-key-0001", "requests_per_minute": 2},
        {"name": "free", "key": "free-key-0001"}]))
    slow, free = access.grant("slow-key-0001"), access.grant("free-key-0001")
    assert [access.take(slow) is None for _ in range(3)] == [True, True, False]
    assert 0 < access.take(slow) <= 30.0   # seconds until the next request is allowed
    assert all(access.take(free) is None for _ in range(100))


def test_edits_are_picked_up_and_a_broken_edit_keeps_the_last_keys(tmp_path, monkeypatch):
    monkeypatch.setattr(keys, "RELOAD_CHECK_S", 0.0)
    path = write(tmp_path / "keys.json", [{"name": "a", "key": "first-key-001"}])
    access = Access(keys_file=path)
    assert access.grant("first-key-001") is not None
    write(path, [{"name": "b", "key": "second-key-01"}])
    os.utime(path, (time.time() + 5, time.time() + 5))
    assert access.grant("first-key-001") is None and access.grant("second-key-01") is not None
    path.write_text("{ half written")
    os.utime(path, (time.time() + 10, time.time() + 10))
    assert access.grant("second-key-01") is not None


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_a_broken_keys_file_stops_the_command_with_its_reason(tmp_path, command):
    from typer.testing import CliRunner

    from glmcot.cli import app

    questions = tmp_path / "questions.jsonl"
    questions.write_text("")
    bad = write(tmp_path / "keys.json", [{"name": "x", "key": "short"}])
    extra = ["--transport", "http"] if command == "mcp" else []
    result = CliRunner().invoke(app, [command, *extra, "--scripted", str(questions), "--keys-file", str(bad)])
    assert result.exit_code == 2
    assert "key: a string of at least 8 characters" in result.output
