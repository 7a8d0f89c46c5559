"""The kernel build lock: a dead builder never leaves it held, a live one is waited on with a
message and a bound, and torch's own stale lock file does not hang a later start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from glmcot.engine.kernels import BuildLockTimeout, build_lock, build_name, build_root, cpu_kernels

HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from glmcot.engine.kernels import build_lock
    with build_lock(Path(sys.argv[1]), timeout=5):
        print("held", flush=True)
        time.sleep(600)
""")


def holder(path):
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_killed_holder_leaves_the_lock_free(tmp_path):
    path = tmp_path / "build.lock"
    child = holder(path)
    child.send_signal(signal.SIGKILL)  # what a CI timeout or an OOM kill does mid-build
    child.wait(timeout=60)
    with build_lock(path, timeout=0):
        assert path.read_text().strip() == f"pid {os.getpid()}"


def test_a_live_holder_times_out_with_a_message_naming_lock_and_owner(tmp_path, capsys):
    path = tmp_path / "build.lock"
    child = holder(path)
    try:
        with pytest.raises(BuildLockTimeout) as raised:
            with build_lock(path, timeout=1.0, poll=0.05):
                pass
        message = str(raised.value)
        assert str(path) in message and f"pid {child.pid}" in message
        assert "GLMCOT_KERNEL_BUILD_TIMEOUT" in message
        assert "waiting for the CPU kernel build lock" in capsys.readouterr().err
    finally:
        child.terminate()
        child.wait(timeout=60)
    with build_lock(path, timeout=0):  # free once its owner has gone
        pass


def test_torch_stale_lock_file_in_the_build_folder_does_not_hang_a_start():
    if cpu_kernels() is None:
        pytest.skip("the CPU kernels cannot be built on this machine")
    stale = build_root() / build_name() / "lock"
    stale.write_text("")  # left by a torch build killed mid-way; torch alone would wait on it forever
    result = subprocess.run(
        [sys.executable, "-c", "from glmcot.engine.kernels import cpu_kernels, cpu_kernels_error as e;"
                               "print(cpu_kernels() is not None, e())"],
        capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "True", result.stdout + result.stderr
    assert not stale.exists()


def test_separate_environments_build_in_separate_folders(monkeypatch):
    first = build_name()
    monkeypatch.setattr(sys, "prefix", sys.prefix + "-other")
    assert build_name() != first
