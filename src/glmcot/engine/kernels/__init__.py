"""C++ kernels for the CPU, compiled on this machine at first use.

`cpu_kernels()` builds the C++ sources here (decode attention over the paged cache, RMSNorm,
rotary embedding) with torch's extension builder (a C++ compiler and
ninja are needed; `-march=native`, so the build is specific to this CPU and is cached under
torch's extensions directory, $TORCH_EXTENSIONS_DIR or ~/.cache/torch_extensions) and returns
the module, or None when it cannot be built; `cpu_kernels_error()` then says why. The engine
falls back to its PyTorch attention path in that case; both paths are tested against the same
reference. A first build takes about half a minute on two cores; later processes load it.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import shutil
import sys
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
    import torch

    digest = hashlib.sha256()
    parts = [path.read_bytes() for path in SOURCES + HEADERS]
    parts += [" ".join(FLAGS).encode(), _cpu_signature().encode(), torch.__version__.encode(), sys.version.encode()]
    for part in parts:
        digest.update(part)
    return f"glmcot_cpu_kernels_{digest.hexdigest()[:12]}"


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
        build_directory = getattr(cpp, "_get_build_directory", None)  # private: only to tell a first build apart
        if build_directory is None or not (Path(build_directory(name, verbose=False)) / f"{name}.so").exists():
            print("glmcot: compiling the CPU kernels for this machine (once, about 30 s)", file=sys.stderr,
                  flush=True)
        return cpp.load(name, [str(source) for source in SOURCES], extra_cflags=list(FLAGS), extra_ldflags=["-fopenmp"], verbose=False), ""
    except Exception as exc:  # no compiler, no ninja, an unsupported platform: the PyTorch path remains
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
