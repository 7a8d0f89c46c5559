"""Request behaviour on a tiny random model: stops, streaming, forced decoding, sampling,
priorities, errors, the async engine and the CLI."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from glmcot.engine import LLM, AsyncEngine, EngineConfig, PromptTooLongError, SamplingParams, Segment

MODEL = "random:qwen3:tiny"


@pytest.fixture(scope="module")
def llm():
    return LLM(EngineConfig(model=MODEL, num_threads=2, block_size=8, kv_cache_tokens=4096, max_model_len=512))


def test_forced_decoding_emits_exact_text_with_real_steps(llm):
    text = "p = RetrieveNode(\"Jane Smith\")\nprint(NodeFeature(p, \"name\"))\n北京 ✓"
    steps = llm.stats()["steps"]
    out = llm.generate("Write code:", SamplingParams(forced_text=text, max_tokens=200))[0]
    assert out.text == text and out.finish_reason == "stop"
    assert out.token_ids == llm.tokenizer.encode(text)
    assert llm.stats()["steps"] - steps == len(out.token_ids)  # one real forward per emitted token
    cut = llm.generate("Write code:", SamplingParams(forced_text=text, max_tokens=5))[0]
    assert cut.token_ids == out.token_ids[:5] and cut.finish_reason == "length"


def test_streaming_deltas_join_to_text_and_lines_fire(llm):
    text = "first line\nsecond 北京 line\n\nlast é"
    deltas, lines = [], []
    engine = llm.engine
    engine.add_request("go", SamplingParams(forced_text=text), on_delta=deltas.append, on_line=lines.append)
    outs = []
    while engine.has_unfinished():
        outs += engine.step()
    assert "".join(deltas) == outs[0].text == text
    assert all("\ufffd" not in d for d in deltas) and len(deltas) > 3
    assert lines == ["first line", "second 北京 line", "", "last é"]


def test_stop_strings_cut_text_and_stream_matches(llm):
    deltas = []
    engine = llm.engine
    engine.add_request("go", SamplingParams(forced_text="alpha beta STOP gamma", stop=["STOP", "zz"]), on_delta=deltas.append)
    out = []
    while engine.has_unfinished():
        out += engine.step()
    assert out[0].text == "alpha beta " and out[0].finish_reason == "stop"
    assert "".join(deltas) == "alpha beta "


def test_stop_token_ids_and_eos(llm):
    ids = llm.tokenizer.encode("one two three four")
    out = llm.generate("x", SamplingParams(forced_token_ids=ids, stop_token_ids=[ids[2]]))[0]
    assert out.token_ids == ids[:3] and out.finish_reason == "stop"
    eos = llm.tokenizer.token_to_id("<|endoftext|>")
    out = llm.generate("x", SamplingParams(forced_token_ids=ids[:1] + [eos] + ids[1:], max_tokens=3))[0]
    assert out.token_ids == ids[:1] + [eos] + ids[1:2]  # forced text is emitted as is, EOS included


def test_max_tokens_zero_is_prefill_only_and_warms_cache(llm):
    prompt = "A long shared system prompt for the agents. " * 4
    warm = llm.generate(prompt, SamplingParams(max_tokens=0))[0]
    assert warm.token_ids == [] and warm.finish_reason == "length"
    hit = llm.generate(prompt + "Question?", SamplingParams(max_tokens=1))[0]
    assert hit.cached_tokens >= (warm.prompt_tokens // 8 - 1) * 8


def test_seeded_sampling_is_reproducible_and_top_k_1_is_greedy(llm):
    p = SamplingParams(temperature=1.0, top_p=0.9, top_k=50, seed=123, max_tokens=12, ignore_eos=True)
    a, b = llm.generate(["hello", "hello"], [p, p])
    assert a.token_ids == b.token_ids
    greedy = llm.generate("hello", SamplingParams(max_tokens=12, ignore_eos=True))[0]
    k1 = llm.generate("hello", SamplingParams(temperature=0.7, top_k=1, max_tokens=12, ignore_eos=True, seed=1))[0]
    assert k1.token_ids == greedy.token_ids
    hot = llm.generate(["hello"] * 3, SamplingParams(temperature=5.0, max_tokens=12, ignore_eos=True))
    assert len({tuple(o.token_ids) for o in hot}) > 1


def test_segments_keep_boundaries_and_join_text(llm):
    segs = [Segment("System prompt.", level=1, key="sys"), Segment(" Notebook: fact.", level=2), Segment(" Q?")]
    engine = llm.engine
    ids, spans = engine.tokenize_prompt(segs)
    assert [s.level for s in spans] == [1, 2, 4] and spans[0].key == "sys"
    assert spans[-1].end == len(ids) and llm.tokenizer.decode(ids) == "System prompt. Notebook: fact. Q?"
    out = llm.generate([segs], SamplingParams(max_tokens=2, ignore_eos=True))[0]
    assert out.prompt_tokens == len(ids)


def test_prompt_that_can_never_fit_is_a_clear_error(llm):
    with pytest.raises(PromptTooLongError, match="max_model_len"):
        llm.generate(["fine", list(range(1, 600))])
    assert not llm.engine.has_unfinished()
    with pytest.raises(ValueError, match="empty"):
        llm.generate([""])
    with pytest.raises(ValueError, match="out of range"):
        llm.generate([[1, 2, 10**6]])


def test_priority_orders_admission():
    llm = LLM(EngineConfig(model=MODEL, num_threads=2, max_num_seqs=1))
    outs = llm.generate(["a", "b", "c"], SamplingParams(max_tokens=2, ignore_eos=True), priorities=[5, 0, 1])
    first = sorted(outs, key=lambda o: o.metrics.first_scheduled_time)
    assert [o.request_id for o in first] == [outs[1].request_id, outs[2].request_id, outs[0].request_id]


def test_async_engine_submit_stream_abort_and_errors():
    with AsyncEngine(EngineConfig(model=MODEL, num_threads=2, max_model_len=256)) as engine:
        lines = []
        futures = [engine.submit(f"prompt {i}", SamplingParams(forced_text=f"x{i}\ny{i}"), on_line=lines.append)
                   for i in range(4)]
        outs = [f.result(timeout=60) for f in futures]
        assert [o.text for o in outs] == [f"x{i}\ny{i}" for i in range(4)]
        assert sorted(lines) == sorted([f"x{i}" for i in range(4)] + [f"y{i}" for i in range(4)])

        async def collect():
            return [d async for d in engine.stream("hi", SamplingParams(forced_text="stream me, 北京"))]

        assert "".join(asyncio.run(collect())) == "stream me, 北京"

        long = engine.submit("x", SamplingParams(max_tokens=200, ignore_eos=True))
        engine.abort(long.request_id)
        aborted = long.result(timeout=60)
        assert aborted.finish_reason == "abort" and len(aborted.token_ids) < 200

        with pytest.raises(PromptTooLongError):
            engine.submit(list(range(1, 300)))
        engine.end_session("s1")
        bad = engine.submit("x", SamplingParams(forced_text="ok"), on_delta=lambda d: 1 / 0)
        assert bad.result(timeout=60).text == "ok"  # a raising callback does not kill the request
        assert engine.stats()["blocks_used"] == 0


def test_cli_generate_json():
    from glmcot.cli import app

    result = CliRunner().invoke(app, ["engine", "generate", "--model", MODEL, "--prompt", "Who wrote",
                                      "--max-tokens", "5", "--ignore-eos", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output.strip().splitlines()[-1])
    assert len(data["token_ids"]) == 5 and data["finish_reason"] == "length" and isinstance(data["text"], str)
    bad = CliRunner().invoke(app, ["engine", "generate", "--model", "random:gpt:huge", "--prompt", "x"])
    assert bad.exit_code == 2 and "bad model spec" in bad.output


def test_segment_list_alone_is_one_prompt(llm):
    segs = [Segment("System.", level=1), Segment(" Question?")]
    outs = llm.generate(segs, SamplingParams(max_tokens=3, ignore_eos=True))
    assert len(outs) == 1 and len(outs[0].token_ids) == 3


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_runs(dtype):
    import torch

    llm = LLM(EngineConfig(model="random:llama:tiny", dtype=dtype, num_threads=2, kv_cache_tokens=1024))
    assert llm.engine.runner.kv_cache.dtype == getattr(torch, dtype)
    assert next(llm.engine.model.parameters()).dtype == getattr(torch, dtype)
    out = llm.generate(["Who wrote", "The graph"], SamplingParams(max_tokens=6, ignore_eos=True))
    assert [len(o.token_ids) for o in out] == [6, 6]


def test_tiny_temperatures_are_greedy_and_bad_ones_refused(llm):
    greedy = llm.generate("hello", SamplingParams(max_tokens=8, ignore_eos=True))[0]
    for temperature in (1e-300, 1e-38, 1e-6):
        tiny = llm.generate("hello", SamplingParams(temperature=temperature, max_tokens=8, ignore_eos=True))[0]
        assert tiny.token_ids == greedy.token_ids and tiny.finish_reason == "length"
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="temperature"):
            SamplingParams(temperature=bad)


def test_sampling_a_non_finite_row_falls_back_to_its_argmax():
    import torch

    from glmcot.engine.core.request import Request
    from glmcot.engine.core.sampler import sample

    logits = torch.tensor([[0.0, 3.0, float("nan")], [float("inf"), 0.0, 1.0], [1e38, -1e38, 0.0]])
    requests = [Request(f"r{i}", [1], SamplingParams(temperature=0.5, seed=i)) for i in range(3)]
    for request in requests:
        request.generator = torch.Generator().manual_seed(0)
    tokens = sample(logits, requests)
    assert all(isinstance(t, int) and 0 <= t < 3 for t in tokens)
    assert tokens[1] == 0 and tokens[2] == 0


def test_one_requests_sampling_or_detokenising_failure_fails_it_alone(monkeypatch):
    from glmcot.engine.async_engine import RequestFailedError
    from glmcot.engine.core import detokenizer, sampler
    from tests.engine.conftest import exploding_parts

    row, add_token = exploding_parts()
    monkeypatch.setattr(sampler, "sample_row", row)
    monkeypatch.setattr(detokenizer.TextStream, "add_token", add_token)
    with AsyncEngine(EngineConfig(model=MODEL, num_threads=2, max_model_len=256)) as engine:
        good = [engine.submit(f"prompt {i}", SamplingParams(temperature=1.0, seed=i, max_tokens=6, ignore_eos=True))
                for i in range(3)]
        bad_sample = engine.submit("x", SamplingParams(temperature=1.0, seed=666, max_tokens=6))
        bad_text = engine.submit("y", SamplingParams(max_tokens=6, stop=["BOOM"]))
        with pytest.raises(RequestFailedError, match="sampler exploded"):
            bad_sample.result(timeout=120)
        with pytest.raises(RequestFailedError, match="detokeniser exploded"):
            bad_text.result(timeout=120)
        assert [len(f.result(timeout=120).token_ids) for f in good] == [6, 6, 6]
        after = engine.submit("z", SamplingParams(max_tokens=3, ignore_eos=True)).result(timeout=120)
        assert len(after.token_ids) == 3  # the loop is still alive
        assert engine.stats()["blocks_used"] == 0


def test_a_failed_request_in_the_sync_engine_reports_why(llm, monkeypatch):
    from glmcot.engine.core import sampler

    real_row = sampler.sample_row
    monkeypatch.setattr(sampler, "sample_row", lambda logits, greedy, request: (_ for _ in ()).throw(
        ValueError("bad row")) if request.sampling.seed == 7 else real_row(logits, greedy, request))
    ok, failed = llm.generate(["a", "b"], [SamplingParams(max_tokens=3, ignore_eos=True),
                                           SamplingParams(temperature=1.0, seed=7, max_tokens=3)])
    assert len(ok.token_ids) == 3 and ok.error is None
    assert failed.finish_reason == "error" and "bad row" in failed.error
    assert not llm.engine.has_unfinished()


def test_logprobs_are_the_models_log_softmax(llm, monkeypatch):
    import torch

    from glmcot.engine.core import llm_engine

    seen = []
    real = llm_engine.sample

    def capture(logits, requests):
        seen.append(logits.clone())
        return real(logits, requests)

    monkeypatch.setattr(llm_engine, "sample", capture)
    out = llm.generate("The graph", SamplingParams(max_tokens=5, ignore_eos=True, logprobs=3))[0]
    assert len(out.logprobs) == len(out.token_ids) == 5 and len(seen) == 5
    for entry, token, logits in zip(out.logprobs, out.token_ids, seen):
        expected = torch.log_softmax(logits[0].float(), dim=-1)
        assert entry.token_id == token
        assert entry.logprob == pytest.approx(float(expected[token]), abs=1e-5)
        assert len(entry.top) == 3 and entry.top[0][0] == token   # greedy: the likeliest token
        assert entry.logprob == pytest.approx(max(lp for _, lp in entry.top), abs=1e-6)
        assert [lp for _, lp in entry.top] == sorted((lp for _, lp in entry.top), reverse=True)
    plain = llm.generate("The graph", SamplingParams(max_tokens=5, ignore_eos=True))[0]
    assert plain.logprobs is None and plain.token_ids == out.token_ids
    with pytest.raises(ValueError, match="logprobs"):
        SamplingParams(logprobs=21)


def test_ended_sessions_are_forgotten_beyond_a_bound(llm):
    from glmcot.engine.cache.sessions import MAX_ENDED_SESSIONS

    levels = llm.engine.levels
    for i in range(MAX_ENDED_SESSIONS + 500):
        llm.end_session(f"session-{i}")
    assert len(levels.ended) == MAX_ENDED_SESSIONS
    assert "session-0" not in levels.ended and f"session-{MAX_ENDED_SESSIONS + 499}" in levels.ended


def test_a_failed_step_fails_every_request_in_flight_and_the_engine_serves_on(monkeypatch):
    """A model failure in one step fails the requests in that step (abort_all), frees their blocks,
    and the next request is served."""
    from glmcot.engine.core.llm_engine import LLMEngine

    real_step, state = LLMEngine.step, {"exploded": False}

    def step(self):
        if len(self.requests) == 3 and not state["exploded"]:  # once, with all three in flight
            state["exploded"] = True
            raise RuntimeError("the model exploded")
        return real_step(self)

    monkeypatch.setattr(LLMEngine, "step", step)
    with AsyncEngine(EngineConfig(model=MODEL, num_threads=2, max_model_len=256)) as engine:
        running = [engine.submit(f"prompt {i}", SamplingParams(max_tokens=20, ignore_eos=True)) for i in range(3)]
        for future in running:
            with pytest.raises(RuntimeError, match="the model exploded"):
                future.result(timeout=120)
        assert engine.engine.requests == {}
        after = engine.submit("z", SamplingParams(max_tokens=3, ignore_eos=True)).result(timeout=120)
        assert len(after.token_ids) == 3
