"""The scripted policy force-decoded through the native engine (random tiny Qwen3 weights)."""

import pytest

from glmcot.agents import AgentConfig, GLMAgent
from glmcot.llm import BackendSpec
from glmcot.system import make_backend


@pytest.fixture(scope="module")
def native(context, records):
    pytest.importorskip("torch")
    backend = make_backend(BackendSpec.parse("scripted+native:random:qwen3:tiny"), questions=records, context=context,
                           engine={"num_threads": 2})
    yield backend
    backend.close()


def test_scripted_on_native_gives_gold_answers_with_real_counts(native, context, records):
    agent = GLMAgent(native, context, AgentConfig(domain="dblp"))
    first = agent.answer(records[0]["question"], records[0]["qid"])
    second = agent.answer(records[2]["question"], records[2]["qid"])
    assert first.answer == records[0]["answer"] and second.answer == records[2]["answer"]
    assert first.backend == "scripted policy on native random:qwen3:tiny"
    assert first.output_tokens > 0 and first.prompt_tokens > 0
    # The shared agent prompts are in the engine's prefix cache by the second question.
    assert second.cached_tokens > 0
    assert native.inner.stats()["generated_tokens"] >= first.output_tokens + second.output_tokens
