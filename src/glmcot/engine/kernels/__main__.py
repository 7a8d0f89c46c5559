"""`python -m glmcot.engine.kernels`: build (or load) the CPU kernels now and say which path runs.

Setup runs this once, so that no later command or test pays for the compile."""

import sys

from glmcot.engine.kernels import build_root, cpu_kernels, cpu_kernels_error

if cpu_kernels() is not None:
    print(f"glmcot: CPU kernels ready (builds under {build_root()})", file=sys.stderr)
else:
    print(f"glmcot: CPU kernels unavailable, the PyTorch path runs ({cpu_kernels_error()})", file=sys.stderr)
