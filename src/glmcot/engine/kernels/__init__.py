"""C++ kernels for the CPU, compiled on this machine at first use.

`cpu_kernels()` builds the C++ sources here (decode attention over the paged cache, RMSNorm,
rotary embedding) with torch's extension builder (a C++ compiler and
ninja are needed; `-march=native`, so the build is specific to this CPU and is cached per
virtual environment under $TORCH_EXTENSIONS_DIR or ~/.cache/glmcot/kernels, behind a lock that a
killed build cannot leave held) and returns
the module, or None when it cannot be built; `cpu_kernels_error()` then says why. The engine
falls back to its PyTorch attention path in that case; both paths are tested against the same
reference. A first build takes about half a minute on two cores; later processes load it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import platform
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

SOURCES = tuple(Path(__file__).with_name(name) for name in ("cpu_attention.cpp", "cpu_pointwise.cpp", "bindings.cpp"))
HEADERS = (Path(__file__).with_name("cpu_convert.h"),)
FLAGS = ("-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-fno-math-errno", "-fno-trapping-math")
MAX_HEAD_DIM = 256  # larger heads use the PyTorch path


def _cpu_signature() -> str:
    """The CPU's model and feature flags: a build for one CPU must not be loaded on another."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def build_name() -> str:
    """A name unique to these sources, flags, CPU, torch, Python and virtual environment: separate
    environments never share (and half-overwrite) one build."""
    import torch

    digest = hashlib.sha256()
    parts = [path.read_bytes() for path in SOURCES + HEADERS]
    parts += [" ".join(FLAGS).encode(), _cpu_signature().encode(), torch.__version__.encode(), sys.version.encode(),
              sys.prefix.encode()]
    for part in parts:
        digest.update(part)
    return f"glmcot_cpu_kernels_{digest.hexdigest()[:12]}"


def build_root() -> Path:
    """Where builds live: $TORCH_EXTENSIONS_DIR when set, else ~/.cache/glmcot/kernels."""
    configured = os.environ.get("TORCH_EXTENSIONS_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "glmcot" / "kernels"


def build_timeout() -> float:
    """Seconds to wait for another process's build ($GLMCOT_KERNEL_BUILD_TIMEOUT, default 900)."""
    try:
        return max(0.0, float(os.environ.get("GLMCOT_KERNEL_BUILD_TIMEOUT", "900")))
    except ValueError:
        return 900.0


class BuildLockTimeout(RuntimeError):
    pass


@contextlib.contextmanager
def build_lock(path: Path, timeout: float, poll: float = 0.5) -> Iterator[None]:
    """An exclusive flock on `path`. The kernel releases it when its owner exits, however it exits
    (Ctrl-C, SIGKILL, a CI timeout), so a dead builder can never leave it held; a live one is
    waited for up to `timeout` seconds, saying every half minute whom we wait on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        start = time.monotonic()
        next_note = start
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                now = time.monotonic()
                if now - start >= timeout:
                    raise BuildLockTimeout(f"another process has held the kernel build lock {path} for more than "
                                           f"{timeout:.0f} s (owner: {_lock_owner(handle)}); set "
                                           "GLMCOT_KERNEL_BUILD_TIMEOUT to wait longer") from None
                if now >= next_note:
                    print(f"glmcot: waiting for the CPU kernel build lock {path} (held by {_lock_owner(handle)})",
                          file=sys.stderr, flush=True)
                    next_note = now + 30
                time.sleep(poll)  # a sleep, so SIGINT and SIGTERM act at once
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}\n")
            handle.flush()
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _lock_owner(handle) -> str:
    try:
        handle.seek(0)
        return handle.read().strip() or "unknown pid"
    except OSError:
        return "unknown pid"


def _ninja_on_path() -> None:
    """torch's builder runs `ninja` from PATH; the pip package's binary is not on it when the
    virtual environment is not activated, so add its directory."""
    if shutil.which("ninja") is None:
        try:
            import ninja
        except ImportError:
            return
        os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")


@functools.cache
def _load() -> tuple[ModuleType | None, str]:
    try:
        import torch.utils.cpp_extension as cpp

        _ninja_on_path()
        cpp.verify_ninja_availability()
        name = build_name()
        directory = build_root() / name
        with build_lock(build_root() / f"{name}.lock", build_timeout()):
            # torch's own lock file inside the build folder is left behind when a build is killed, and
            # torch then waits on it forever; only a holder of our lock builds here, so it is stale.
            (directory / "lock").unlink(missing_ok=True)
            directory.mkdir(parents=True, exist_ok=True)
            if not (directory / f"{name}.so").exists():
                print("glmcot: compiling the CPU kernels for this machine (once, about 30 s)", file=sys.stderr,
                      flush=True)
            module = cpp.load(name, [str(source) for source in SOURCES], extra_cflags=list(FLAGS),
                              extra_ldflags=["-fopenmp"], build_directory=str(directory), verbose=False)
        return module, ""
    except Exception as exc:  # no compiler, no ninja, an unsupported platform, a lock held too long
        reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
        log.warning("CPU attention kernel unavailable, using the PyTorch path (%s)", reason)
        return None, reason


def cpu_kernels() -> ModuleType | None:
    """The compiled module (`paged_decode_attention`, `rms_norm`, `rotary_`), or None if it
    cannot be built here."""
    return _load()[0]


def cpu_kernels_error() -> str:
    """Why `cpu_kernels()` is None ('' when it is available)."""
    return _load()[1]
