"""A trace-driven KV-cache simulator over real cache code (`glmcot bench kvsim`).

trace.py (the trace format and recording), cost.py (the time model), policies.py (the field's
alternatives as eviction policies), backends.py (the native and vLLM caches behind one
scheduler), sim.py (the discrete-event simulation and arms), sweep.py (pool x concurrency sweeps
and their report), command.py (the command line). docs/benchmarks.md has the results.
"""
