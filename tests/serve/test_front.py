"""What every request meets before a handler: API key, body limits, JSON errors, docs."""

from __future__ import annotations

import httpx
import pytest

from .conftest import API_KEY

AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture()
def client(bare_server):
    with httpx.Client(base_url=bare_server.url, timeout=30) as client:
        yield client


def test_binds_loopback_by_default(bare_server):
    assert bare_server.config.host == "127.0.0.1"


def test_health_needs_no_key(client):
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


@pytest.mark.parametrize("path,method", [("/metrics", "GET"), ("/v1/models", "GET"),
                                         ("/v1/ask", "POST"), ("/v1/completions", "POST"),
                                         ("/v1/chat/completions", "POST"), ("/openapi.json", "GET"),
                                         ("/no/such/path", "GET")])
def test_missing_key_is_401_json(client, path, method):
    response = client.request(method, path, json={"question": "q"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    error = response.json()["error"]
    assert error["type"] == "authentication_error"
    assert "missing API key" in error["message"]


def test_wrong_key_is_401(client):
    response = client.get("/metrics", headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "invalid API key"


def test_key_accepted_as_bearer_or_x_api_key(client):
    assert client.get("/metrics", headers=AUTH).status_code == 200
    assert client.get("/metrics", headers={"X-API-Key": API_KEY}).status_code == 200


def test_oversized_body_is_413_before_parsing(client):
    response = client.post("/v1/ask", headers=AUTH, json={"question": "x" * 10_000})
    assert response.status_code == 413
    assert "4096 bytes" in response.json()["error"]["message"]


def test_oversized_chunked_body_is_413(client):
    def chunks():
        for _ in range(10):
            yield b"x" * 1000

    response = client.post("/v1/ask", headers={**AUTH, "Content-Type": "application/json"},
                           content=chunks())
    assert response.status_code == 413


def test_question_over_limit_is_413(client):
    response = client.post("/v1/ask", headers=AUTH, json={"question": "y" * 101})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "question_too_large"


def test_malformed_json_is_400(client):
    response = client.post("/v1/ask", headers={**AUTH, "Content-Type": "application/json"},
                           content=b'{"question": ')
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "malformed JSON body"


def test_invalid_fields_are_400_with_a_message(client):
    response = client.post("/v1/ask", headers=AUTH,
                           json={"question": "q", "method": "magic", "options": {"typo": 1}})
    assert response.status_code == 400   # as OpenAI and vLLM answer, not FastAPI's 422
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_request"
    message = error["message"]
    assert "method" in message and "options.typo" in message
    assert "Traceback" not in response.text


def test_unknown_path_is_json_404(client):
    response = client.get("/v2/whatever", headers=AUTH)
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "no endpoint at /v2/whatever"


def test_openai_endpoints_without_engine_say_why(client):
    response = client.post("/v1/completions", headers=AUTH, json={"prompt": "hi"})
    assert response.status_code == 501
    assert "--model" in response.json()["error"]["message"]


def test_ask_without_graphs_names_the_problem(client):
    response = client.post("/v1/ask", headers=AUTH, json={"question": "who?"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "missing_graph"


def test_openapi_schema_is_published(client):
    schema = client.get("/openapi.json", headers=AUTH).json()
    for path in ("/v1/ask", "/v1/completions", "/v1/chat/completions", "/v1/models",
                 "/metrics", "/health"):
        assert path in schema["paths"]
    assert "AskResponse" in schema["components"]["schemas"]
    docs = client.get("/docs", headers=AUTH)
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_metrics_count_requests_by_endpoint_and_status(client):
    client.get("/health")
    text = client.get("/metrics", headers=AUTH).text
    assert "# TYPE glmcot_requests_total counter" in text
    assert 'glmcot_requests_total{endpoint="/health",status="200"}' in text
    assert 'glmcot_requests_rejected_total{reason="busy"} 0' in text
    assert 'glmcot_server_info{policy="model",model="none"} 1' in text
