"""GLM serving co-design benchmark: vertex-chunk KV reuse and four-level priority eviction.

Replays a multi-agent workload through the native engine under KV memory pressure, with forced
decoding (every forward pass, cache hit and eviction is real; the text is scripted), for the
arms below in the same run, each on its own engine (one copy of the weights). The arms run in
lock-step, one engine step of each in turn, and each arm's time is the sum of its own steps: on a
shared, noisy machine the slow and fast moments fall on every arm alike (--sequential runs them
one after the other). Throughput is sessions per second of the arm's own time; call latency is
measured in that time too. --control ARM runs a second copy of ARM alongside: the two do
identical work, so their throughput spread is this run's noise floor (2-7 % on this 2-core
machine), and an effect smaller than it is not measured. Most of that spread follows the order the
engines' KV pools were allocated (in our profiles the first was faster for a whole run): --repeats N
creates the engines in a rotated order each time and reports the median.

    lru+facts     the paper's vertex-centric-off baseline: the same notebooks cut into single facts
                  (a line of a vertex chunk, or one fact block) listed by a fixed per-fact score, so
                  a new fact lands anywhere rather than at the end; prefix caching, LRU eviction
    lru           vLLM-style prefix caching, LRU eviction, chunk keys ignored (exact); notebooks of
                  whole vertex chunks appended in order, so a session's next call hits its notebook
    lru+chunks    the same plus vertex-chunk reuse (pic, first k tokens of each chunk recomputed;
                  a chunk's KV is taken from the first prompt that computed it: chunk_source=context)
    glm+chunks    four-level priority eviction (P4, P3, P2, P1) plus vertex-chunk reuse; inside P3,
                  prefix blocks no other session has read go first (engine policy glm)
    glm-paper+chunks  the same with the four levels exactly as the paper describes them (P3 one LRU
                  level; policy glm-paper)
    glm+isolated  glm+chunks with every chunk computed alone (chunk_source=isolated)

The workload follows GRBench-style GLM sessions (one session = one question): a C-Agent call,
then rounds of R-Agent (P1 prompt + P2 notebook + P4 question) and A-Agent (P1 prompt + P4
"missing" text) calls; each retrieval adds vertex chunks, drawn from a heavy-tailed (Zipf)
popularity over the graph's vertices, to the session's notebook; a final R call answers and the
session ends (end_session demotes its notebook to P3). Many sessions run concurrently (closed
loop: a session's next call starts when its previous one returns). The synthetic workload is
seeded; its settings are in the JSON.

With --traces (or --record-traces N, which first runs the GLM agent on the synthetic GRBench-schema
domains), the sessions are recorded GLM questions instead: the agents' real prompts, notebooks,
vertex chunks and responses, mixed over domains as one server answering all of them sees them.

It also measures fidelity of position-independent chunk reuse (pic, pic0) against full prefill
on the same prompts: top-1 agreement and KL of the next-token distributions, teacher-forced along
the same completion. Random weights cannot tell fidelity for a real model: run the same command
with --model /path/to/local/checkpoint for that.

    python -m glmcot.benchmarks.codesign                  # about 6-8 minutes on 2 CPU cores
    python -m glmcot.benchmarks.codesign --quick          # about 2 minutes
    python -m glmcot.benchmarks.codesign --record-traces 20 --sessions 100   # recorded GLM sessions
    python -m glmcot.benchmarks.codesign --traces runs/glm-traces/           # from glmcot.benchmarks.agents --traces or run_questions(traces=)
    python -m glmcot.benchmarks.codesign --model /models/Qwen3-0.6B --device cuda --kv-tokens 60000 --sessions 400
"""

from glmcot.benchmarks.codesign.command import main

__all__ = ["main"]
