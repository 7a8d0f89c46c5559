"""The benchmarks: each module prints a table, writes JSON and has `main(argv)`.

(`tiny_checkpoint` is not a benchmark: it writes the tiny random checkpoint the vLLM ones use; `mini_sample`
scores the shipped glmcot-mini on its recorded held-out sample; `common`
holds what their outputs share: the run header, number formats, JSON and figure writing.)
Run one with `python -m glmcot.benchmarks.NAME --help` or `glmcot bench NAME -- ARGS`; results and
their commands are in docs/benchmarks.md. Speed is only ever compared against a peer in the same run.
"""

NAMES = ("graph", "engine", "engine_kernels", "engine_gpu", "codesign", "codesign_sweep", "codesign_repeats",
         "agents", "serve", "graph_update", "graph_sources",
         "vllm_codesign", "vllm_plugin_overhead", "vllm_eval", "serve_vs_vllm", "mini", "kvsim", "grammar")
