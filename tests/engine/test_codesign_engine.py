"""GLM co-design, engine level: vertex-chunk reuse (exactness of the re-rotation, fidelity modes,
hit accounting), priority eviction and sessions under memory pressure, warm-up, refcounts."""

from __future__ import annotations

import pytest

from glmcot.engine import LLM, AsyncEngine, EngineConfig, SamplingParams, Segment
from glmcot.engine.segments import wrap_chat

SYSTEM = ("You are the reason agent. Read the notebook and the question; answer only from the notebook, "
          "otherwise say what is missing.\n")
CHUNKS = {
    "v:P1": "Node P1 (paper): title Graph neural networks for knowledge graphs; year 2019; cites P2, P3.\n",
    "v:A9": "Node A9 (author): name Ada Lovelace; wrote P1 and P4; affiliation Cambridge; h-index 41.\n",
    "v:V3": "Node V3 (venue): name NeurIPS; papers P1, P2, P8; field machine learning and graphs.\n",
}


def chunk(key: str, level: int = 2) -> Segment:
    return Segment(CHUNKS[key], level, key)


def notebook_prompt(keys: list[str], question: str, fact: str | None = None) -> list[Segment]:
    segments = [Segment(SYSTEM, 1), Segment("Notebook:\n", 2)]
    for i, key in enumerate(keys):
        segments.append(chunk(key))
        if fact and i == 0:
            segments.append(Segment(fact, 2))
    return segments + [Segment(f"Question: {question}\n", 4)]


def make_llm(ref, **kwargs) -> LLM:
    kwargs.setdefault("block_size", 4)
    kwargs.setdefault("chunk_source", "isolated")  # the exactness tests below need isolated chunks
    kwargs.setdefault("chunk_admission", 1)  # and chunks indexed the first time they are seen
    return LLM(EngineConfig(model=ref.directory, dtype="float32", num_threads=2, **kwargs))


def greedy(n: int) -> SamplingParams:
    return SamplingParams(max_tokens=n, ignore_eos=True)


def assert_all_released(llm: LLM) -> None:
    pool = llm.engine.kv.pool
    assert llm.engine.kv.req_blocks == {}
    assert all(block.ref_count == 0 for block in pool.blocks)
    assert pool.num_free_blocks == pool.num_blocks and llm.stats()["blocks_used"] == 0


@pytest.mark.parametrize("name", ["qwen3-untied", "llama-untied"])
def test_reused_chunk_equals_the_chunk_computed_alone_at_its_new_position(name, references):
    """The cached chunk (computed alone at position 0) copied to position p, keys re-rotated,
    equals the chunk computed alone at p by transformers: every layer, K and V, fp32."""
    import torch

    ref = references(name)
    llm = make_llm(ref, chunk_reuse="pic0")
    engine = llm.engine
    llm.generate([[Segment("Notebook:\n", 2), chunk("v:A9"), Segment("Q?\n", 4)]], greedy(1))
    prompt = notebook_prompt(["v:P1", "v:A9"], "who wrote P1?", fact="Fact 1: P1 has 3 citations.\n")
    ids, spans = engine.tokenize_prompt(prompt)
    span = next(s for s in spans if s.key == "v:A9")
    assert span.start % 4 != 0  # a position that is not even block-aligned
    hits_before = llm.stats()["chunk_hits_tokens"]
    request = engine.add_request(prompt, greedy(3))
    while request.num_computed_tokens < request.num_prompt_tokens:
        engine.step()
    assert llm.stats()["chunk_hits_tokens"] - hits_before == span.end - span.start
    cache = engine.runner.kv_cache
    layers, _, num_blocks, bs, heads, dim = cache.shape
    table = engine.kv.block_ids(request)
    slots = torch.tensor([table[p // bs] * bs + p % bs for p in range(span.start, span.end)])
    got = cache.view(layers, 2, num_blocks * bs, heads, dim).index_select(2, slots)
    with torch.no_grad():
        out = ref.model(torch.tensor([ids[span.start : span.end]]),
                        position_ids=torch.arange(span.start, span.end)[None], use_cache=True)
    for layer in range(layers):
        cached = out.past_key_values.layers[layer]
        want_k = cached.keys[0].transpose(0, 1)  # [tokens, kv_heads, dim]
        want_v = cached.values[0].transpose(0, 1)
        scale = want_k.abs().max().item()
        assert (got[layer, 0] - want_k).abs().max().item() <= 1e-4 * max(scale, 1.0), f"layer {layer} K"
        assert (got[layer, 1] - want_v).abs().max().item() <= 1e-4 * max(want_v.abs().max().item(), 1.0)
    while engine.has_unfinished():
        engine.step()
    assert_all_released(llm)


def rotate_keys_float64(keys, delta: int, theta: float):
    """Keys [tokens, heads, dim] (neox half-split RoPE) turned by `delta` more positions,
    computed independently of the engine in float64."""
    import torch

    dim = keys.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    angle = torch.cat((inv_freq, inv_freq)) * delta
    k = keys.double()
    rotated = torch.cat((-k[..., dim // 2 :], k[..., : dim // 2]), dim=-1)
    return k * angle.cos() + rotated * angle.sin()


@pytest.mark.parametrize("name", ["qwen3-untied", "qwen2-tied"])
def test_context_source_reuses_the_first_prompts_kv_at_a_new_position(name, references):
    """chunk_source=context (GLM's Fig. 7): the first prompt computes a chunk in context and
    nothing else (no chunk job); a later prompt holding it at another position gets exactly
    those values and those keys turned by the position difference."""
    import torch

    ref = references(name)
    llm = make_llm(ref, chunk_reuse="pic0", chunk_source="context")
    engine = llm.engine

    def run_prompt(prompt):
        ids, spans = engine.tokenize_prompt(prompt)
        span = next(s for s in spans if s.key == "v:A9")
        request = engine.add_request(prompt, greedy(2))
        while request.num_computed_tokens < request.num_prompt_tokens:
            engine.step()
        cache = engine.runner.kv_cache
        layers, _, num_blocks, bs, heads, dim = cache.shape
        table = engine.kv.block_ids(request)
        slots = torch.tensor([table[p // bs] * bs + p % bs for p in range(span.start, span.end)])
        rows = cache.view(layers, 2, num_blocks * bs, heads, dim).index_select(2, slots).clone()
        while engine.has_unfinished():
            engine.step()
        return ids, span, rows

    first_ids, first_span, first_rows = run_prompt([Segment("Notebook:\n", 2), chunk("v:A9"), Segment("Q?\n", 4)])
    stats = llm.stats()
    n = first_span.end - first_span.start
    assert stats["chunk_computed_tokens"] == 0 and stats["chunk_captured_tokens"] == n
    assert stats["prompt_tokens_computed"] == len(first_ids)  # a chunk seen once costs nothing extra
    _, span, rows = run_prompt(notebook_prompt(["v:P1", "v:A9"], "who wrote P1?", fact="Fact 1: three.\n"))
    assert span.start != first_span.start
    assert llm.stats()["chunk_hits_tokens"] == n  # pic0: the whole chunk comes from the index
    reused = n
    theta = engine.model_config.rope_theta
    for layer in range(rows.shape[0]):
        assert torch.equal(rows[layer, 1, :reused], first_rows[layer, 1, :reused]), f"layer {layer} V"
        want = rotate_keys_float64(first_rows[layer, 0, :reused], span.start - first_span.start, theta)
        scale = max(want.abs().max().item(), 1.0)
        assert (rows[layer, 0, :reused].double() - want).abs().max().item() <= 1e-4 * scale, f"layer {layer} K"
    assert_all_released(llm)


@pytest.mark.parametrize("source", ["context", "isolated"])
def test_admission_indexes_a_chunk_only_when_a_second_question_reads_it(source, references):
    """chunk_admission=2: the first question holding a chunk computes it in context and indexes
    nothing (no copy, no job), even when it sends the chunk again; the second question indexes
    it; the third reuses it."""
    ref = references("qwen3-untied")
    llm = make_llm(ref, chunk_reuse="pic0", chunk_source=source, chunk_admission=2)
    n = len(llm.engine.tokenizer.encode(CHUNKS["v:A9"]))
    heads = ("Notebook:\n", "Notes, part two:\n", "A third notebook here:\n", "Fourth:\n")
    prompts = [[Segment(head, 2), chunk("v:A9"), Segment("Q?\n", 4)] for head in heads]
    llm.generate(prompts[:2], greedy(1), sessions=["q1", "q1"])
    stats = llm.stats()
    assert stats["chunk_admission_skips"] == 2 and len(llm.engine.kv.pool.chunks) == 0
    assert stats["chunk_captured_tokens"] == 0 and stats["chunk_computed_tokens"] == 0
    llm.generate([prompts[2]], greedy(1), sessions=["q2"])
    stats = llm.stats()
    assert stats["chunk_admission_skips"] == 2 and len(llm.engine.kv.pool.chunks) == 1
    assert stats["chunk_captured_tokens" if source == "context" else "chunk_computed_tokens"] == n
    hits_before = stats["chunk_hits_tokens"]
    llm.generate([prompts[3]], greedy(1), sessions=["q3"])
    assert llm.stats()["chunk_hits_tokens"] - hits_before == n
    for session in ("q1", "q2", "q3"):
        llm.end_session(session)
    assert_all_released(llm)


def test_admission_must_be_positive():
    from glmcot.engine import EngineConfig

    with pytest.raises(ValueError, match="chunk_admission"):
        EngineConfig(chunk_admission=0)


def test_exact_mode_ignores_keys_and_stays_identical_to_transformers(references):
    ref = references("qwen3-untied")
    prompts = [notebook_prompt(["v:P1", "v:A9"], "who wrote P1?"), notebook_prompt(["v:A9", "v:V3"], "where?"),
               notebook_prompt(["v:V3", "v:P1", "v:A9"], "how many?", fact="Fact 1: none.\n")]
    # A small pool and the glm policy: eviction and preemption happen, the outputs may not change.
    llm = make_llm(ref, chunk_reuse="exact", eviction_policy="glm", kv_cache_tokens=400, max_num_seqs=8)
    outs = llm.generate(prompts * 2, greedy(8))
    for prompt, out in zip(prompts * 2, outs):
        ids = llm.engine.tokenize_prompt(prompt)[0]
        assert out.token_ids == ref.greedy(ids, 8)
    stats = llm.stats()
    assert stats["chunk_hits_tokens"] == 0 and stats["chunks_cached"] == 0 and stats["evictions"] > 0
    assert_all_released(llm)


@pytest.mark.parametrize("mode", ["pic", "pic0"])
def test_chunk_modes_do_not_depend_on_the_cache_state(mode, references):
    """A keyed chunk always gets its isolated KV (computed on a miss, copied on a hit), so a
    cold and a warm engine give the same tokens; hits are counted apart from prefix hits."""
    ref = references("qwen3-untied")
    target = notebook_prompt(["v:V3", "v:P1"], "which venue?", fact="Fact 1: P1 is about graphs.\n")
    cold = make_llm(ref, chunk_reuse=mode, pic_recompute_tokens=5)
    cold_out = cold.generate([target], greedy(8))[0]
    assert cold.stats()["chunk_hits_tokens"] == 0 and cold.stats()["chunk_computed_tokens"] > 0
    assert cold_out.cached_tokens == 0

    warm = make_llm(ref, chunk_reuse=mode, pic_recompute_tokens=5)
    warm.generate([[Segment("Other agent prompt.\n", 1), chunk("v:P1"), Segment("x\n", 4), chunk("v:V3"),
                    Segment("y\n", 4)]], greedy(2))
    computed = warm.stats()["prompt_tokens_computed"]
    warm_out = warm.generate([target], greedy(8))[0]
    assert warm_out.token_ids == cold_out.token_ids
    stats = warm.stats()
    k = 5 if mode == "pic" else 0
    reused = sum(len(warm.engine.tokenize_prompt([chunk(key)])[0]) - k for key in ("v:V3", "v:P1"))
    assert stats["chunk_hits_tokens"] == reused and stats["prefix_hits_tokens"] == 0
    assert warm_out.cached_tokens == reused
    assert stats["prompt_tokens_computed"] - computed == warm_out.prompt_tokens - reused
    # the same hits by priority level: all of them notebook (P2) chunk tokens
    levels = warm_out.level_tokens
    assert sum(total for total, _ in levels.values()) == warm_out.prompt_tokens
    assert {level: cached for level, (_, cached) in levels.items()} == {1: 0, 2: reused, 4: 0}
    assert cold_out.level_tokens.keys() == levels.keys() and all(c == 0 for _, c in cold_out.level_tokens.values())
    assert_all_released(cold)
    assert_all_released(warm)


def test_pic_recomputes_chunk_heads_in_context_and_differs_from_pic0(references):
    import torch

    ref = references("qwen3-untied")
    prompt = notebook_prompt(["v:P1"], "title?")
    ids, spans = make_llm(ref).engine.tokenize_prompt(prompt)
    span = next(s for s in spans if s.key)
    caches = {}
    for mode in ("pic", "pic0"):
        llm = make_llm(ref, chunk_reuse=mode, pic_recompute_tokens=4)
        request = llm.engine.add_request(prompt, greedy(2))
        while request.num_computed_tokens < request.num_prompt_tokens:
            llm.engine.step()
        cache = llm.engine.runner.kv_cache
        table = llm.engine.kv.block_ids(request)
        slots = torch.tensor([table[p // 4] * 4 + p % 4 for p in range(span.start, span.end)])
        layers = cache.shape[0]
        caches[mode] = cache.view(layers, 2, -1, *cache.shape[-2:]).index_select(2, slots).clone()
        while llm.engine.has_unfinished():
            llm.engine.step()
    head_gap = (caches["pic"][1:, :, :4] - caches["pic0"][1:, :, :4]).abs().max().item()
    tail_gap = (caches["pic"][:, :, 4:] - caches["pic0"][:, :, 4:]).abs().max().item()
    assert head_gap > 1e-3  # the first 4 tokens attended to the prompt before them in pic
    assert tail_gap == 0.0  # the rest is the same isolated KV in both modes


@pytest.mark.parametrize("source", ["context", "isolated"])
def test_chunk_reuse_under_pressure_completes_and_releases_everything(references, source):
    ref = references("qwen3-untied")
    prompts = [notebook_prompt(keys, q) for keys, q in (
        (["v:P1", "v:A9"], "who?"), (["v:A9", "v:V3"], "where?"), (["v:V3", "v:P1", "v:A9"], "all?"),
        (["v:P1"], "title?"), (["v:V3", "v:A9"], "venue?"))] * 2
    tight = make_llm(ref, chunk_reuse="pic", chunk_source=source, eviction_policy="glm", kv_cache_tokens=480,
                     max_num_seqs=10)
    outs = tight.generate(prompts, greedy(6))
    stats = tight.stats()
    assert all(o.finish_reason == "length" and len(o.token_ids) == 6 for o in outs)
    assert stats["evictions"] > 0 or stats["preemptions"] > 0
    if source == "isolated":
        assert stats["chunk_hits_tokens"] > 0
    # Outputs are not compared with an unpressured run: a prompt may prefix-hit blocks another
    # prompt computed with a chunk in context where it would itself have reused the chunk, and
    # which prompt ran first depends on admission order, which memory pressure changes.
    assert_all_released(tight)


def prompt_with_p1(llm: LLM, n: int, level: int = 1) -> list[Segment]:
    text = " ".join(f"rule{n}_{i} keep the graph facts straight" for i in range(6)) + "\n"
    return [Segment(text, level), Segment(f"Question {n}: go.\n", 4)]


@pytest.mark.parametrize("policy", ["lru", "glm"])
def test_warmed_agent_prompt_survives_transient_traffic_only_under_glm(policy, references):
    ref = references("qwen3-tied")
    llm = make_llm(ref, eviction_policy=policy, kv_cache_tokens=256, p1_cap_fraction=0.5)
    system = Segment(SYSTEM * 2, 1)
    warm = llm.generate([[system, Segment("warm\n", 4)]], SamplingParams(max_tokens=0))[0]
    assert warm.token_ids == [] and warm.finish_reason == "length"  # prefill only
    for i in range(12):  # P4 traffic, about twice the pool
        llm.generate([[Segment(f"Transient question {i}: " + "filler words here " * 6 + "\n", 4)]], greedy(2))
    out = llm.generate([[system, Segment("Question: now?\n", 4)]], greedy(2))[0]
    system_tokens = len(llm.engine.tokenize_prompt([system])[0])
    if policy == "glm":
        assert out.cached_tokens >= system_tokens - 4
        assert llm.stats()["evictions_p1"] == 0 and llm.stats()["evictions_p4"] > 0
    else:
        assert out.cached_tokens < system_tokens - 4
    assert_all_released(llm)


def test_p1_flood_cannot_wedge_the_pool(references):
    ref = references("qwen3-tied")
    llm = make_llm(ref, eviction_policy="glm", p1_cap_fraction=0.25, kv_cache_tokens=192, max_num_seqs=4)
    prompts = [prompt_with_p1(llm, n) for n in range(16)]  # every request brings its own P1 prompt
    outs = llm.generate(prompts, greedy(4))
    assert all(o.finish_reason == "length" and len(o.token_ids) == 4 for o in outs)
    stats = llm.stats()
    assert stats["evictions_p1"] > 0  # P1 beyond the cap had to go
    assert llm.engine.kv.pool.policy.num_p1_overflow > 0
    assert_all_released(llm)


def test_end_session_demotes_notebook_blocks_through_both_apis(references):
    ref = references("qwen3-tied")
    llm = make_llm(ref, eviction_policy="glm", chunk_reuse="pic")
    prompts = [notebook_prompt(["v:P1", "v:A9"], "who?"), notebook_prompt(["v:V3"], "where?", fact="Fact 1: x.\n")]
    llm.generate(prompts, greedy(2), sessions=["q1", "q2"])
    pool = llm.engine.kv.pool
    levels_before = sorted(b.level for b in pool.blocks if b.block_hash is not None or b.key is not None)
    assert 2 in levels_before and 3 not in levels_before
    demoted = llm.end_session("q1")
    assert demoted > 0 and llm.stats()["sessions_demoted_blocks"] == demoted
    assert pool.chunks.lookup("v:A9", tuple(llm.engine.tokenize_prompt([chunk("v:A9")])[0])).blocks[0].level == 3
    assert pool.chunks.lookup("v:V3", tuple(llm.engine.tokenize_prompt([chunk("v:V3")])[0])).blocks[0].level == 2
    assert_all_released(llm)

    with AsyncEngine(EngineConfig(model=ref.directory, dtype="float32", num_threads=2, block_size=4,
                                  eviction_policy="glm")) as engine:
        engine.submit(prompts[0], greedy(2), session="s").result(timeout=120)
        engine.end_session("s")
        engine.submit([Segment("sync\n", 4)], greedy(1)).result(timeout=120)  # the loop handled the command
        assert engine.stats()["sessions_demoted_blocks"] > 0


def test_chat_wrapping_keeps_segment_boundaries(references):
    ref = references("qwen3-tied")
    llm = make_llm(ref)
    segments = notebook_prompt(["v:P1"], "who?")
    wrapped = wrap_chat(llm.tokenizer, segments, system="Be brief.")
    assert wrapped[1:-1] == segments
    assert wrapped[0].level == 1 and wrapped[-1].level == 4 and wrapped[-1].text.endswith("assistant\n")
    joined = "".join(s.text for s in segments)
    assert "".join(s.text for s in wrapped) == llm.tokenizer.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": joined}])


def test_gaps_between_reused_chunks_are_computed_in_one_step(references):
    """With its chunks cached, a prompt's gaps (the text between and after reused chunks) are
    computed in one forward pass, and its KV and output equal those of the same prompt when a
    tiny token budget splits the work one range per step."""
    import torch

    ref = references("qwen3-untied")
    prompt = notebook_prompt(["v:P1", "v:A9", "v:V3"], "which venue?", fact="Fact 1: P1 has 3 citations.\n")
    results = {}
    for budget in (2048, 8):
        llm = make_llm(ref, chunk_reuse="pic", pic_recompute_tokens=2, max_num_batched_tokens=budget)
        llm.generate([[chunk(key), Segment("Q?\n", 4)] for key in ("v:P1", "v:A9", "v:V3")], greedy(1))  # cache them
        seen: list = []
        original = llm.engine.scheduler.schedule

        def spy():
            plan = original()
            seen.extend(item.ranges for item in plan.scheduled if item.ranges)
            return plan

        llm.engine.scheduler.schedule = spy
        request = llm.engine.add_request(prompt, greedy(4))
        while request.num_computed_tokens < request.num_prompt_tokens:
            llm.engine.step()
        cache = llm.engine.runner.kv_cache
        slots = torch.tensor([b * 4 + i for b in llm.engine.kv.block_ids(request) for i in range(4)][: request.num_prompt_tokens])
        kv = cache.view(cache.shape[0], 2, -1, *cache.shape[-2:]).index_select(2, slots).clone()
        while llm.engine.has_unfinished():
            llm.engine.step()
        results[budget] = (seen, kv, request.output_token_ids, llm.stats()["chunk_hits_tokens"])
        assert_all_released(llm)
    multi, split = results[2048], results[8]
    assert any(len(ranges) >= 3 for ranges in multi[0])  # the gaps after P1, A9 and V3 in one step
    assert multi[3] == split[3] > 0  # the same chunk hits
    torch.testing.assert_close(multi[1], split[1], rtol=1e-5, atol=1e-5)
    assert multi[2] == split[2]
