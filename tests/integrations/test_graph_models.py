"""Graph QA as OpenAI models ("<method>/<graph>") with the `openai` client against a real
`glmcot serve` process, streaming and not (scripted policy: a system check, never accuracy)."""

from __future__ import annotations

import openai
import pytest

from .conftest import BY_QID, KEYS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(served):
    return openai.OpenAI(base_url=served + "/v1", api_key=KEYS["reader"], max_retries=0, timeout=120)


def ask(question):
    return [{"role": "system", "content": "You answer over a graph."},
            {"role": "user", "content": "an earlier question"},
            {"role": "assistant", "content": "an earlier answer"},
            {"role": "user", "content": question}]


def test_models_list_the_graphs_the_key_sees(client):
    ids = {model.id for model in client.models.list().data}
    assert {"glm/dblp", "graphcot/dblp"} <= ids
    assert not any("secret" in model_id for model_id in ids)


@pytest.mark.parametrize("method", ["glm", "graphcot"])
def test_a_chat_completion_answers_the_last_user_message(client, method):
    record = BY_QID["s-1"]
    completion = client.chat.completions.create(model=f"{method}/dblp", messages=ask(record["question"]))
    message = completion.choices[0].message
    assert message.content == record["answer"]
    reasoning = message.model_extra["reasoning_content"]
    assert ("RetrieveNode(" in reasoning) if method == "glm" else ("Action: RetrieveNode[" in reasoning)
    usage = completion.usage
    assert usage.model_extra["llm_calls"] >= 3   # every agent call counted, not just the last
    assert usage.prompt_tokens > 1000 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_streaming_sends_the_steps_then_the_answer(client):
    record = BY_QID["s-1"]
    stream = client.chat.completions.create(model="glm/dblp", messages=ask(record["question"]), stream=True,
                                            stream_options={"include_usage": True})
    reasoning, content, usage, order = [], [], None, []
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            step = (choice.delta.model_extra or {}).get("reasoning_content")
            if step:
                reasoning.append(step)
                order.append("reasoning")
            if choice.delta.content:
                content.append(choice.delta.content)
                order.append("content")
    assert "".join(content) == record["answer"]
    assert len(reasoning) >= 4 and any("Sandbox: a1, a3" in step for step in reasoning)
    assert order[-1] == "content" and order.index("content") > order.index("reasoning")
    assert usage is not None and usage.model_extra["llm_calls"] >= 3


def test_bad_requests_get_clear_errors(client):
    with pytest.raises(openai.NotFoundError, match="not served here"):
        client.chat.completions.create(model="glm/secret", messages=ask(BY_QID["s-0"]["question"]))
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="glm/nowhere", messages=ask(BY_QID["s-0"]["question"]))
    with pytest.raises(openai.BadRequestError, match="no user message"):
        client.chat.completions.create(model="glm/dblp", messages=[{"role": "system", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="one answer per request"):
        client.chat.completions.create(model="glm/dblp", messages=ask(BY_QID["s-0"]["question"]), n=2)
    with pytest.raises(openai.APIStatusError, match="exceeds the server's limit") as error:
        client.chat.completions.create(model="glm/dblp", messages=ask("x" * 5000))
    assert error.value.status_code == 413
    # the scripted policy only knows its own questions: a clear 400, not a failure inside the agent
    with pytest.raises(openai.BadRequestError, match="not in the server's questions file"):
        client.chat.completions.create(model="glm/dblp", messages=ask("What is the meaning of life?"))


def test_a_client_leaving_a_stream_frees_its_slot(served):
    import time

    import httpx

    from .conftest import auth

    body = {"model": "glm/dblp", "stream": True, "messages": [{"role": "user", "content": BY_QID["s-1"]["question"]}]}
    with httpx.Client(base_url=served, headers=auth("reader"), timeout=120) as client:
        with client.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            next(response.iter_lines())   # the first chunk, then the client goes away
        deadline = time.monotonic() + 60
        while True:
            metrics = client.get("/metrics").text
            (line,) = [line for line in metrics.splitlines() if line.startswith("glmcot_requests_in_flight ")]
            if float(line.split()[-1]) == 0:
                break
            assert time.monotonic() < deadline, line
            time.sleep(0.2)
        answered = client.post("/v1/chat/completions", json={**body, "stream": False})
        assert answered.json()["choices"][0]["message"]["content"] == BY_QID["s-1"]["answer"]


def test_parameters_a_graph_model_cannot_honour_are_refused_by_name(client):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    with pytest.raises(openai.BadRequestError, match="tools is not supported by graph models"):
        client.chat.completions.create(model="glm/dblp", messages=ask(BY_QID["s-0"]["question"]), tools=tools)
    with pytest.raises(openai.BadRequestError, match="logprobs is not supported"):
        client.chat.completions.create(model="glm/dblp", messages=ask(BY_QID["s-0"]["question"]), logprobs=True)
