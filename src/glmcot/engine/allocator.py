"""Keep large freed buffers in the process heap on CPU (glibc only).

glibc serves allocations above its mmap threshold (dynamic, at most 32 MiB) with fresh mmaps and
returns them on free, so every layer of a prefill page-faults its big temporaries anew; on our
VMs that costs about 7 % of an end-to-end run (docs/benchmarks.md). Raising the mmap and trim
thresholds keeps them in the heap for reuse. Process-wide: the resident size then stays at its
peak instead of shrinking after a burst.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def keep_large_buffers(mmap_threshold: int = 1 << 30, trim_threshold: int = (1 << 31) - 1) -> bool:
    """True when glibc accepted both settings; False (and nothing changed) elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    ok = bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(M_TRIM_THRESHOLD, trim_threshold))
    if not ok:
        log.debug("mallopt refused the heap thresholds; keeping the C library's defaults")
    return ok
