"""Greedy outputs must be token-identical to transformers on the same weights (fp32)."""

from __future__ import annotations

import pytest

from tests.engine.conftest import PROMPTS, VARIANTS

from glmcot.engine import LLM, EngineConfig, SamplingParams

MAX_NEW = 12


def make_llm(ref, **kwargs) -> LLM:
    return LLM(EngineConfig(model=ref.directory, dtype="float32", num_threads=2, **kwargs))


def check(llm: LLM, ref, prompts_ids: list[list[int]], max_new: int = MAX_NEW):
    outs = llm.generate(prompts_ids, SamplingParams(max_tokens=max_new, ignore_eos=True))
    for ids, out in zip(prompts_ids, outs):
        assert out.token_ids == ref.greedy(ids, max_new), f"{ref.name}: prompt of {len(ids)} tokens diverged"
        assert out.finish_reason == "length"
    return outs


@pytest.mark.parametrize("name", list(VARIANTS))
def test_alone_and_batched_match_transformers(name, references, tokenizer):
    ref = references(name)
    prompts = [tokenizer.encode(p) for p in PROMPTS]
    llm = make_llm(ref, enable_prefix_caching=False)
    for ids in prompts[:2]:
        check(llm, ref, [ids])  # alone
    check(llm, ref, prompts)  # batched with each other
    assert llm.stats()["blocks_used"] == 0


@pytest.mark.parametrize("name", ["qwen3-tied", "llama-untied"])
def test_pytorch_attention_path_matches(name, references, tokenizer):
    """The decode path without the compiled CPU kernel (cpu_kernels=False, or no compiler)."""
    ref = references(name)
    prompts = [tokenizer.encode(p) for p in PROMPTS]
    llm = make_llm(ref, cpu_kernels=False)
    assert llm.engine.runner.decode_kernel is None
    check(llm, ref, prompts)
    check(llm, ref, prompts)  # warm: cached prompts, decode over prefix hits


@pytest.mark.parametrize("name", ["qwen3-untied", "qwen2-tied", "llama-untied"])
def test_warm_prefix_cache_matches(name, references, tokenizer):
    ref = references(name)
    shared = tokenizer.encode(PROMPTS[2] + " " + PROMPTS[0])
    prompts = [shared + tokenizer.encode(" " + p) for p in PROMPTS]
    together = check(make_llm(ref, block_size=4), ref, prompts)  # one step admits them all
    assert together[0].cached_tokens == 0
    assert all(o.cached_tokens >= (len(shared) // 4) * 4 - 4 for o in together[1:])  # in-step sharing
    llm = make_llm(ref, block_size=4)
    cold = check(llm, ref, prompts[:1])
    assert cold[0].cached_tokens == 0
    warm = check(llm, ref, prompts)  # every prompt re-hits the shared prefix
    assert all(o.cached_tokens >= (len(shared) // 4) * 4 - 4 for o in warm)
    again = check(llm, ref, prompts[:1])  # the full prompt, hit up to the last token
    assert again[0].cached_tokens == ((len(prompts[0]) - 1) // 4) * 4
    stats = llm.stats()
    assert stats["prefix_hits_tokens"] > 0 and stats["prefix_hit_rate"] > 0.5


@pytest.mark.parametrize("name", ["qwen3-tied", "llama-tied"])
def test_preemption_and_small_pool_match(name, references, tokenizer):
    ref = references(name)
    prompts = [tokenizer.encode(p) for p in PROMPTS] * 2
    # 40 blocks of 4 tokens: far less than the ~10 requests need together.
    llm = make_llm(ref, block_size=4, kv_cache_tokens=160, max_num_seqs=16)
    check(llm, ref, prompts, max_new=16)
    stats = llm.stats()
    assert stats["preemptions"] > 0
    assert stats["blocks_used"] == 0


@pytest.mark.parametrize("name", ["qwen3-untied", "qwen2-untied"])
def test_chunked_prefill_matches(name, references, tokenizer):
    ref = references(name)
    prompts = [tokenizer.encode(p) for p in PROMPTS]
    llm = make_llm(ref, block_size=4, max_num_batched_tokens=7)
    check(llm, ref, prompts)
    assert llm.stats()["steps"] > sum(len(p) for p in prompts) // 7


def test_hash_collisions_cannot_return_wrong_kv(references, tokenizer):
    ref = references("qwen3-untied")
    prompts = [tokenizer.encode(p) for p in PROMPTS]
    llm = LLM(EngineConfig(model=ref.directory, num_threads=2, block_size=4), hash_fn=lambda parent, tokens: 7)
    check(llm, ref, prompts)
    check(llm, ref, prompts[::-1])  # every lookup collides; only equal tokens may hit


def test_no_prefix_caching_and_disabled_chunking_match(references, tokenizer):
    ref = references("qwen2-tied")
    prompts = [tokenizer.encode(p) for p in PROMPTS]
    llm = make_llm(ref, enable_prefix_caching=False, enable_chunked_prefill=False, max_num_batched_tokens=16)
    check(llm, ref, prompts)


@pytest.mark.parametrize("layout", ["onednn", "transposed", "plain"])
@pytest.mark.parametrize("name", ["qwen3-tied", "qwen2-untied"])
def test_every_cpu_weight_layout_matches_transformers(name, layout, references, tokenizer, monkeypatch):
    """The oneDNN-packed layout and both fallbacks (torch without oneDNN; no CPU preparation at
    all, as on a GPU) give transformers' greedy tokens."""
    from glmcot.engine.layers import linear
    from glmcot.engine.models import decoder

    if layout != "onednn":
        monkeypatch.setattr(linear, "onednn_available", lambda dtype=None: False)
    if layout == "plain":
        monkeypatch.setattr(decoder.DecoderModel, "prepare_for_cpu", lambda self: None)
    ref = references(name)
    llm = make_llm(ref)
    model = llm.engine.model
    attention = model.layers[0].self_attn.qkv_proj
    assert (attention.packed is not None) == (layout == "onednn" and linear.onednn_available())
    assert (attention.weight_t is not None) == (layout == "transposed")
    check(llm, ref, [tokenizer.encode(p) for p in PROMPTS])
